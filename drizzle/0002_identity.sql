CREATE TABLE "refresh_tokens" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "refresh_tokens_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"session_id" bigint NOT NULL,
	"token_sha256" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"consumed_at" timestamp with time zone,
	"replaced_by_id" bigint,
	CONSTRAINT "refresh_tokens_token_sha256_key" UNIQUE("token_sha256"),
	CONSTRAINT "refresh_tokens_id_session_id_key" UNIQUE("id","session_id")
);

--> statement-breakpoint
CREATE TABLE "session_membership_brokers" (
	"session_membership_id" bigint PRIMARY KEY NOT NULL,
	"membership_id" bigint NOT NULL,
	"membership_broker_id" bigint NOT NULL,
	"selected_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "session_memberships" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "session_memberships_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"session_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"tenant_id" bigint NOT NULL,
	"membership_id" bigint NOT NULL,
	"entered_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"left_at" timestamp with time zone,
	CONSTRAINT "session_memberships_id_membership_id_key" UNIQUE("id","membership_id")
);

--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "sessions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"user_id" bigint NOT NULL,
	"token_sha256" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"last_seen_at" timestamp with time zone,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"revoked_by_user_id" bigint,
	CONSTRAINT "sessions_uid_key" UNIQUE("uid"),
	CONSTRAINT "sessions_token_sha256_key" UNIQUE("token_sha256"),
	CONSTRAINT "sessions_id_user_id_key" UNIQUE("id","user_id")
);

--> statement-breakpoint
CREATE TABLE "user_login_verifications" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "user_login_verifications_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_login_id" bigint NOT NULL,
	"code_sha256" "bytea" NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"consumed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "user_logins" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "user_logins_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" bigint NOT NULL,
	"tenant_id" bigint NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"value_normalized" text NOT NULL,
	"verified_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"removed_at" timestamp with time zone,
	"removed_by_user_id" bigint,
	CONSTRAINT "user_logins_kind_check" CHECK (kind IN ('email', 'phone', 'username', 'tax_id'))
);

--> statement-breakpoint
CREATE TABLE "users" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "users_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"party_id" bigint NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "users_party_id_key" UNIQUE("party_id"),
	CONSTRAINT "users_id_party_id_key" UNIQUE("id","party_id")
);

--> statement-breakpoint
ALTER TABLE "refresh_tokens" ADD CONSTRAINT "refresh_tokens_session_fkey" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "refresh_tokens" ADD CONSTRAINT "refresh_tokens_replaced_by_fkey" FOREIGN KEY ("replaced_by_id","session_id") REFERENCES "public"."refresh_tokens"("id","session_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "session_membership_brokers" ADD CONSTRAINT "session_membership_brokers_session_membership_fkey" FOREIGN KEY ("session_membership_id","membership_id") REFERENCES "public"."session_memberships"("id","membership_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "session_memberships" ADD CONSTRAINT "session_memberships_session_fkey" FOREIGN KEY ("session_id","user_id") REFERENCES "public"."sessions"("id","user_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_revoked_by_fkey" FOREIGN KEY ("revoked_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_login_verifications" ADD CONSTRAINT "user_login_verifications_login_fkey" FOREIGN KEY ("user_login_id") REFERENCES "public"."user_logins"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_logins" ADD CONSTRAINT "user_logins_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_logins" ADD CONSTRAINT "user_logins_removed_by_fkey" FOREIGN KEY ("removed_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_party_fkey" FOREIGN KEY ("party_id") REFERENCES "public"."parties"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "refresh_tokens_live_key" ON "refresh_tokens" USING btree ("session_id") WHERE consumed_at IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "session_memberships_live_key" ON "session_memberships" USING btree ("session_id") WHERE left_at IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "user_logins_live_key" ON "user_logins" USING btree ("tenant_id","kind","value_normalized") WHERE removed_at IS NULL;
--> statement-breakpoint
-- @load sql/identity/constraints.sql
