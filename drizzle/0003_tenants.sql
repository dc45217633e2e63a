CREATE TABLE "tenant_accounts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenant_accounts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"company_party_id" bigint NOT NULL,
	"created_by_user_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "tenant_accounts_tenant_id_company_party_id_key" UNIQUE("tenant_id","company_party_id"),
	CONSTRAINT "tenant_accounts_id_tenant_id_key" UNIQUE("id","tenant_id")
);

--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenants_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"name" text NOT NULL,
	"blueprint_id" bigint NOT NULL,
	"created_by_user_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "tenants_uid_key" UNIQUE("uid")
);

--> statement-breakpoint
ALTER TABLE "tenant_accounts" ADD CONSTRAINT "tenant_accounts_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_accounts" ADD CONSTRAINT "tenant_accounts_company_fkey" FOREIGN KEY ("company_party_id") REFERENCES "public"."company_profiles"("party_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_accounts" ADD CONSTRAINT "tenant_accounts_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenants" ADD CONSTRAINT "tenants_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
-- @load sql/tenants/constraints.sql
