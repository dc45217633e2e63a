CREATE TABLE "credential_versions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "credential_versions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"credential_id" bigint NOT NULL,
	"version" integer NOT NULL,
	"algorithm" text NOT NULL,
	"secret" "bytea" NOT NULL,
	"created_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"retired_at" timestamp with time zone,
	CONSTRAINT "credential_versions_credential_id_version_key" UNIQUE("credential_id","version"),
	CONSTRAINT "credential_versions_id_credential_id_key" UNIQUE("id","credential_id")
);

--> statement-breakpoint
CREATE TABLE "credentials" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "credentials_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"kind" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "credentials_uid_key" UNIQUE("uid"),
	CONSTRAINT "credentials_id_kind_key" UNIQUE("id","kind"),
	CONSTRAINT "credentials_kind_check" CHECK (kind IN ('password', 'financial_institution'))
);

--> statement-breakpoint
CREATE TABLE "financial_institution_credentials" (
	"credential_id" bigint PRIMARY KEY NOT NULL,
	"credential_kind" text DEFAULT 'financial_institution' NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"login" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "financial_institution_credentials_credential_institution_key" UNIQUE("credential_id","financial_institution_id"),
	CONSTRAINT "financial_institution_credentials_kind_check" CHECK (credential_kind = 'financial_institution')
);

--> statement-breakpoint
CREATE TABLE "user_credentials" (
	"user_id" bigint NOT NULL,
	"credential_id" bigint NOT NULL,
	"credential_kind" text DEFAULT 'password' NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "user_credentials_pkey" PRIMARY KEY("user_id","credential_id"),
	CONSTRAINT "user_credentials_credential_id_key" UNIQUE("credential_id"),
	CONSTRAINT "user_credentials_credential_kind_check" CHECK (credential_kind = 'password')
);

--> statement-breakpoint
ALTER TABLE "credential_versions" ADD CONSTRAINT "credential_versions_credential_fkey" FOREIGN KEY ("credential_id") REFERENCES "public"."credentials"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "credential_versions" ADD CONSTRAINT "credential_versions_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "financial_institution_credentials" ADD CONSTRAINT "financial_institution_credentials_credential_fkey" FOREIGN KEY ("credential_id","credential_kind") REFERENCES "public"."credentials"("id","kind") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "financial_institution_credentials" ADD CONSTRAINT "financial_institution_credentials_institution_fkey" FOREIGN KEY ("financial_institution_id") REFERENCES "public"."financial_institutions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_credentials" ADD CONSTRAINT "user_credentials_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "user_credentials" ADD CONSTRAINT "user_credentials_credential_fkey" FOREIGN KEY ("credential_id","credential_kind") REFERENCES "public"."credentials"("id","kind") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "credential_versions_one_active_key" ON "credential_versions" USING btree ("credential_id") WHERE retired_at IS NULL;
--> statement-breakpoint
-- @load sql/credentials/constraints.sql
