CREATE TABLE "bank_credential_deliveries" (
	"credential_version_id" bigint PRIMARY KEY NOT NULL,
	"credential_id" bigint NOT NULL,
	"user_bank_id" bigint NOT NULL,
	"assignment_id" bigint NOT NULL,
	"consumed_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"viewed_by_user_id" bigint NOT NULL,
	"tenant_id" bigint NOT NULL
);

--> statement-breakpoint
CREATE TABLE "bank_user_assignments" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "bank_user_assignments_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_bank_id" bigint NOT NULL,
	"user_id" bigint NOT NULL,
	"party_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"valid_from" date NOT NULL,
	"valid_until" date,
	"created_by_user_id" bigint,
	"ended_by_user_id" bigint,
	"change_reason" text,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"ended_recorded_at" timestamp with time zone,
	"store_code_id" bigint NOT NULL,
	"origin_membership_broker_id" bigint NOT NULL,
	CONSTRAINT "bank_user_assignments_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "bank_user_assignments_id_user_bank_id_key" UNIQUE("id","user_bank_id"),
	CONSTRAINT "bank_user_assignments_id_bank_tenant_broker_key" UNIQUE("id","user_bank_id","tenant_id","broker_id"),
	CONSTRAINT "bank_user_assignments_period_check" CHECK (valid_until IS NULL OR valid_until > valid_from)
);

--> statement-breakpoint
CREATE TABLE "bank_user_transfers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "bank_user_transfers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"user_bank_id" bigint NOT NULL,
	"from_assignment_id" bigint NOT NULL,
	"from_broker_id" bigint NOT NULL,
	"to_assignment_id" bigint NOT NULL,
	"to_broker_id" bigint NOT NULL,
	"effective_on" date NOT NULL,
	"actor_user_id" bigint NOT NULL,
	"actor_membership_id" bigint,
	"actor_broker_id" bigint,
	"reason" text NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "bank_user_transfers_from_assignment_id_key" UNIQUE("from_assignment_id"),
	CONSTRAINT "bank_user_transfers_to_assignment_id_key" UNIQUE("to_assignment_id"),
	CONSTRAINT "bank_user_transfers_distinct_check" CHECK (from_assignment_id <> to_assignment_id)
);

--> statement-breakpoint
CREATE TABLE "user_banks" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "user_banks_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"credential_id" bigint NOT NULL,
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"confirmed_at" timestamp with time zone NOT NULL,
	"closed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "user_banks_credential_id_key" UNIQUE("credential_id"),
	CONSTRAINT "user_banks_id_credential_id_key" UNIQUE("id","credential_id"),
	CONSTRAINT "user_banks_id_user_institution_key" UNIQUE("id","user_id","financial_institution_id")
);

--> statement-breakpoint
ALTER TABLE "bank_credential_deliveries" ADD CONSTRAINT "bank_credential_deliveries_version_fkey" FOREIGN KEY ("credential_version_id","credential_id") REFERENCES "public"."credential_versions"("id","credential_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_credential_deliveries" ADD CONSTRAINT "bank_credential_deliveries_user_bank_fkey" FOREIGN KEY ("user_bank_id","credential_id") REFERENCES "public"."user_banks"("id","credential_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_credential_deliveries" ADD CONSTRAINT "bank_credential_deliveries_assignment_bank_fkey" FOREIGN KEY ("assignment_id","user_bank_id") REFERENCES "public"."bank_user_assignments"("id","user_bank_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_credential_deliveries" ADD CONSTRAINT "bank_credential_deliveries_assignment_tenant_fkey" FOREIGN KEY ("assignment_id","tenant_id") REFERENCES "public"."bank_user_assignments"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_credential_deliveries" ADD CONSTRAINT "bank_credential_deliveries_viewer_fkey" FOREIGN KEY ("viewed_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_origin_link_fkey" FOREIGN KEY ("origin_membership_broker_id","tenant_id","broker_id","user_id") REFERENCES "public"."membership_brokers"("id","tenant_id","broker_id","user_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_store_code_fkey" FOREIGN KEY ("store_code_id","financial_institution_id","tenant_id") REFERENCES "public"."store_codes"("id","financial_institution_id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_user_bank_fkey" FOREIGN KEY ("user_bank_id","user_id","financial_institution_id") REFERENCES "public"."user_banks"("id","user_id","financial_institution_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_user_party_fkey" FOREIGN KEY ("user_id","party_id") REFERENCES "public"."users"("id","party_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_assignments" ADD CONSTRAINT "bank_user_assignments_ended_by_fkey" FOREIGN KEY ("ended_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_transfers" ADD CONSTRAINT "bank_user_transfers_from_fkey" FOREIGN KEY ("from_assignment_id","user_bank_id","tenant_id","from_broker_id") REFERENCES "public"."bank_user_assignments"("id","user_bank_id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_transfers" ADD CONSTRAINT "bank_user_transfers_to_fkey" FOREIGN KEY ("to_assignment_id","user_bank_id","tenant_id","to_broker_id") REFERENCES "public"."bank_user_assignments"("id","user_bank_id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_transfers" ADD CONSTRAINT "bank_user_transfers_actor_fkey" FOREIGN KEY ("actor_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_transfers" ADD CONSTRAINT "bank_user_transfers_actor_membership_fkey" FOREIGN KEY ("actor_membership_id","actor_user_id","tenant_id") REFERENCES "public"."memberships"("id","user_id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "bank_user_transfers" ADD CONSTRAINT "bank_user_transfers_actor_broker_fkey" FOREIGN KEY ("tenant_id","actor_broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_banks" ADD CONSTRAINT "user_banks_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_banks" ADD CONSTRAINT "user_banks_institution_fkey" FOREIGN KEY ("financial_institution_id") REFERENCES "public"."financial_institutions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_banks" ADD CONSTRAINT "user_banks_credential_fkey" FOREIGN KEY ("credential_id","financial_institution_id") REFERENCES "public"."financial_institution_credentials"("credential_id","financial_institution_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "bank_assignments_one_open_key" ON "bank_user_assignments" USING btree ("user_bank_id") WHERE valid_until IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "user_banks_open_key" ON "user_banks" USING btree ("user_id","financial_institution_id") WHERE closed_at IS NULL;
--> statement-breakpoint
-- @load sql/bank-users/constraints.sql
