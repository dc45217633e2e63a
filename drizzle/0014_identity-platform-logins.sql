CREATE TABLE "platform_logins" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_logins_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" bigint NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"value_normalized" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"removed_at" timestamp with time zone,
	CONSTRAINT "platform_logins_kind_check" CHECK (kind IN ('username', 'email'))
);

--> statement-breakpoint
ALTER TABLE "platform_logins" ADD CONSTRAINT "platform_logins_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "platform_logins_live_key" ON "platform_logins" USING btree ("kind","value_normalized") WHERE removed_at IS NULL;
