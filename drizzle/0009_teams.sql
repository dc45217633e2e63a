CREATE TABLE "membership_teams" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "membership_teams_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"team_id" bigint NOT NULL,
	"membership_id" bigint NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "membership_teams_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "team_financial_institution_accounts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "team_financial_institution_accounts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"team_id" bigint NOT NULL,
	"financial_institution_account_id" bigint NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "team_financial_institution_accounts_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "team_hierarchies" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "team_hierarchies_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"subordinate_team_id" bigint NOT NULL,
	"superior_team_id" bigint NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "team_hierarchies_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "teams" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "teams_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"name" text NOT NULL,
	"created_by_user_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "teams_uid_key" UNIQUE("uid"),
	CONSTRAINT "teams_tenant_id_name_key" UNIQUE("tenant_id","name"),
	CONSTRAINT "teams_id_tenant_id_key" UNIQUE("id","tenant_id")
);

--> statement-breakpoint
ALTER TABLE "membership_teams" ADD CONSTRAINT "membership_teams_team_fkey" FOREIGN KEY ("team_id","tenant_id") REFERENCES "public"."teams"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_teams" ADD CONSTRAINT "membership_teams_membership_fkey" FOREIGN KEY ("membership_id","tenant_id") REFERENCES "public"."memberships"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_teams" ADD CONSTRAINT "membership_teams_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "membership_teams" ADD CONSTRAINT "membership_teams_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_financial_institution_accounts" ADD CONSTRAINT "team_financial_institution_accounts_team_fkey" FOREIGN KEY ("team_id","tenant_id") REFERENCES "public"."teams"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_financial_institution_accounts" ADD CONSTRAINT "team_financial_institution_accounts_account_fkey" FOREIGN KEY ("financial_institution_account_id","tenant_id") REFERENCES "public"."financial_institution_accounts"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_financial_institution_accounts" ADD CONSTRAINT "team_financial_institution_accounts_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_financial_institution_accounts" ADD CONSTRAINT "team_financial_institution_accounts_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_hierarchies" ADD CONSTRAINT "team_hierarchies_subordinate_fkey" FOREIGN KEY ("subordinate_team_id","tenant_id") REFERENCES "public"."teams"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_hierarchies" ADD CONSTRAINT "team_hierarchies_superior_fkey" FOREIGN KEY ("superior_team_id","tenant_id") REFERENCES "public"."teams"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_hierarchies" ADD CONSTRAINT "team_hierarchies_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "team_hierarchies" ADD CONSTRAINT "team_hierarchies_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "teams" ADD CONSTRAINT "teams_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "teams" ADD CONSTRAINT "teams_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
-- @load sql/teams/constraints.sql
