CREATE TABLE "broker_prospects" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "broker_prospects_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"party_id" bigint,
	"name" text NOT NULL,
	"tax_id" text,
	"email" text,
	"phone" text,
	"status" text DEFAULT 'open' NOT NULL,
	"owner_membership_id" bigint,
	"created_by_user_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "broker_prospects_uid_key" UNIQUE("uid")
);

--> statement-breakpoint
CREATE TABLE "membership_access_profiles" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "membership_access_profiles_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"membership_id" bigint NOT NULL,
	"broker_id" bigint,
	"access_profile_id" bigint NOT NULL,
	"profile_scope" text GENERATED ALWAYS AS (CASE WHEN broker_id IS NULL THEN 'tenant' ELSE 'broker' END) STORED NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"granted_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "membership_brokers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "membership_brokers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"membership_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"role" text NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "membership_brokers_id_membership_id_key" UNIQUE("id","membership_id"),
	CONSTRAINT "membership_brokers_id_tenant_broker_user_key" UNIQUE("id","tenant_id","broker_id","user_id"),
	CONSTRAINT "membership_brokers_role_check" CHECK (role IN ('master', 'member'))
);

--> statement-breakpoint
CREATE TABLE "membership_portfolios" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "membership_portfolios_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"membership_id" bigint NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"assigned_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "membership_portfolios_id_tenant_broker_key" UNIQUE("id","tenant_id","broker_id"),
	CONSTRAINT "membership_portfolios_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "memberships" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "memberships_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"created_by_user_id" bigint,
	"removed_at" timestamp with time zone,
	"removed_by_user_id" bigint,
	CONSTRAINT "memberships_uid_key" UNIQUE("uid"),
	CONSTRAINT "memberships_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "memberships_id_user_id_tenant_id_key" UNIQUE("id","user_id","tenant_id")
);

--> statement-breakpoint
CREATE TABLE "portfolio_transfers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "portfolio_transfers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"from_portfolio_id" bigint NOT NULL,
	"to_portfolio_id" bigint NOT NULL,
	"effective_on" date NOT NULL,
	"actor_user_id" bigint NOT NULL,
	"actor_membership_id" bigint,
	"reason" text NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "portfolio_transfers_tenant_id_uid_key" UNIQUE("tenant_id","uid"),
	CONSTRAINT "portfolio_transfers_from_portfolio_id_key" UNIQUE("from_portfolio_id"),
	CONSTRAINT "portfolio_transfers_to_portfolio_id_key" UNIQUE("to_portfolio_id")
);

--> statement-breakpoint
ALTER TABLE "broker_prospects" ADD CONSTRAINT "broker_prospects_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_prospects" ADD CONSTRAINT "broker_prospects_party_fkey" FOREIGN KEY ("party_id") REFERENCES "public"."parties"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_prospects" ADD CONSTRAINT "broker_prospects_owner_fkey" FOREIGN KEY ("owner_membership_id","tenant_id") REFERENCES "public"."memberships"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_prospects" ADD CONSTRAINT "broker_prospects_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_membership_fkey" FOREIGN KEY ("membership_id","tenant_id") REFERENCES "public"."memberships"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_profile_fkey" FOREIGN KEY ("access_profile_id","tenant_id") REFERENCES "public"."access_profiles"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_profile_scope_fkey" FOREIGN KEY ("access_profile_id","tenant_id","profile_scope") REFERENCES "public"."access_profiles"("id","tenant_id","scope") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_profile_broker_fkey" FOREIGN KEY ("access_profile_id","tenant_id","broker_id") REFERENCES "public"."access_profiles"("id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_granted_by_fkey" FOREIGN KEY ("granted_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_access_profiles" ADD CONSTRAINT "membership_access_profiles_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_brokers" ADD CONSTRAINT "membership_brokers_membership_fkey" FOREIGN KEY ("membership_id","user_id","tenant_id") REFERENCES "public"."memberships"("id","user_id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_brokers" ADD CONSTRAINT "membership_brokers_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_brokers" ADD CONSTRAINT "membership_brokers_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_brokers" ADD CONSTRAINT "membership_brokers_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_portfolios" ADD CONSTRAINT "membership_portfolios_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_portfolios" ADD CONSTRAINT "membership_portfolios_membership_fkey" FOREIGN KEY ("membership_id","tenant_id") REFERENCES "public"."memberships"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_portfolios" ADD CONSTRAINT "membership_portfolios_assigned_by_fkey" FOREIGN KEY ("assigned_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_portfolios" ADD CONSTRAINT "membership_portfolios_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "memberships" ADD CONSTRAINT "memberships_removed_by_fkey" FOREIGN KEY ("removed_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "portfolio_transfers" ADD CONSTRAINT "portfolio_transfers_from_fkey" FOREIGN KEY ("from_portfolio_id","tenant_id","broker_id") REFERENCES "public"."membership_portfolios"("id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "portfolio_transfers" ADD CONSTRAINT "portfolio_transfers_to_fkey" FOREIGN KEY ("to_portfolio_id","tenant_id","broker_id") REFERENCES "public"."membership_portfolios"("id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "portfolio_transfers" ADD CONSTRAINT "portfolio_transfers_actor_fkey" FOREIGN KEY ("actor_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "portfolio_transfers" ADD CONSTRAINT "portfolio_transfers_actor_membership_fkey" FOREIGN KEY ("actor_membership_id","actor_user_id","tenant_id") REFERENCES "public"."memberships"("id","user_id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "membership_access_profiles_open_key" ON "membership_access_profiles" USING btree ("membership_id","access_profile_id") WHERE valid_until IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "membership_brokers_live_key" ON "membership_brokers" USING btree ("membership_id","broker_id") WHERE valid_until IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "membership_portfolios_open_key" ON "membership_portfolios" USING btree ("tenant_id","broker_id") WHERE valid_until IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "memberships_live_key" ON "memberships" USING btree ("tenant_id","user_id") WHERE removed_at IS NULL;
--> statement-breakpoint
-- @load sql/memberships/constraints.sql
