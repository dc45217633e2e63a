CREATE TABLE "broker_affiliations" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "broker_affiliations_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"parent_id" bigint NOT NULL,
	"started_on" date NOT NULL,
	"ended_on" date,
	"ended_by" bigint,
	"ended_reason" text,
	"approved_by" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "broker_affiliations_uid_key" UNIQUE("uid")
);

--> statement-breakpoint
CREATE TABLE "broker_store_codes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "broker_store_codes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"store_code_id" bigint NOT NULL,
	"regime" text NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"assigned_by_user_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "broker_store_codes_regime_check" CHECK (regime IN ('standard', 'substabelecido', 'indicado', 'subzero')),
	CONSTRAINT "broker_store_codes_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "brokers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "brokers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"party_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "brokers_uid_key" UNIQUE("uid")
);

--> statement-breakpoint
CREATE TABLE "store_codes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "store_codes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"code" text NOT NULL,
	"financial_institution_account_id" bigint,
	"broker_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "store_codes_tenant_institution_code_key" UNIQUE("tenant_id","financial_institution_id","code"),
	CONSTRAINT "store_codes_id_institution_tenant_key" UNIQUE("id","financial_institution_id","tenant_id"),
	CONSTRAINT "store_codes_id_tenant_institution_key" UNIQUE("id","tenant_id","financial_institution_id"),
	CONSTRAINT "store_codes_one_owner_check" CHECK (num_nonnulls(financial_institution_account_id, broker_id) = 1)
);

--> statement-breakpoint
CREATE TABLE "tenant_broker_accounts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenant_broker_accounts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"tenant_account_id" bigint NOT NULL,
	"signed_on" date,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "tenant_brokers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenant_brokers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"broker_code" text,
	"disabled_at" timestamp with time zone,
	"disabled_reason" text,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "tenant_brokers_tenant_id_broker_id_key" UNIQUE("tenant_id","broker_id"),
	CONSTRAINT "tenant_brokers_tenant_id_broker_code_key" UNIQUE("tenant_id","broker_code")
);

--> statement-breakpoint
ALTER TABLE "broker_affiliations" ADD CONSTRAINT "broker_affiliations_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_affiliations" ADD CONSTRAINT "broker_affiliations_parent_fkey" FOREIGN KEY ("tenant_id","parent_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_affiliations" ADD CONSTRAINT "broker_affiliations_ended_by_fkey" FOREIGN KEY ("ended_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_affiliations" ADD CONSTRAINT "broker_affiliations_approved_by_fkey" FOREIGN KEY ("approved_by") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_store_codes" ADD CONSTRAINT "broker_store_codes_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_store_codes" ADD CONSTRAINT "broker_store_codes_store_code_fkey" FOREIGN KEY ("store_code_id","tenant_id","financial_institution_id") REFERENCES "public"."store_codes"("id","tenant_id","financial_institution_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "broker_store_codes" ADD CONSTRAINT "broker_store_codes_assigned_by_fkey" FOREIGN KEY ("assigned_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "brokers" ADD CONSTRAINT "brokers_party_fkey" FOREIGN KEY ("party_id") REFERENCES "public"."parties"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "store_codes" ADD CONSTRAINT "store_codes_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "store_codes" ADD CONSTRAINT "store_codes_institution_fkey" FOREIGN KEY ("financial_institution_id") REFERENCES "public"."financial_institutions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "store_codes" ADD CONSTRAINT "store_codes_account_fkey" FOREIGN KEY ("financial_institution_account_id","tenant_id","financial_institution_id") REFERENCES "public"."financial_institution_accounts"("id","tenant_id","financial_institution_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "store_codes" ADD CONSTRAINT "store_codes_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_broker_accounts" ADD CONSTRAINT "tenant_broker_accounts_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_broker_accounts" ADD CONSTRAINT "tenant_broker_accounts_account_fkey" FOREIGN KEY ("tenant_account_id","tenant_id") REFERENCES "public"."tenant_accounts"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_brokers" ADD CONSTRAINT "tenant_brokers_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_brokers" ADD CONSTRAINT "tenant_brokers_broker_fkey" FOREIGN KEY ("broker_id") REFERENCES "public"."brokers"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "broker_affiliations_open_key" ON "broker_affiliations" USING btree ("tenant_id","broker_id") WHERE ended_on IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_broker_accounts_open_key" ON "tenant_broker_accounts" USING btree ("tenant_id","broker_id","tenant_account_id") WHERE valid_until IS NULL;
--> statement-breakpoint
-- @load sql/brokers/constraints.sql
