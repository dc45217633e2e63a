CREATE TABLE "company_ownerships" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "company_ownerships_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"company_party_id" bigint NOT NULL,
	"owner_party_id" bigint NOT NULL,
	"share_percent" numeric(5, 2),
	"started_on" date NOT NULL,
	"ended_on" date,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "company_profiles" (
	"party_id" bigint PRIMARY KEY NOT NULL,
	"party_kind" text DEFAULT 'company' NOT NULL,
	"legal_name" text NOT NULL,
	"trade_name" text,
	"tax_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "company_profiles_tax_id_key" UNIQUE("tax_id"),
	CONSTRAINT "company_profiles_party_kind_check" CHECK (party_kind = 'company')
);

--> statement-breakpoint
CREATE TABLE "parties" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "parties_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"kind" text NOT NULL,
	"display_name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "parties_id_kind_key" UNIQUE("id","kind"),
	CONSTRAINT "parties_kind_check" CHECK (kind IN ('person', 'company'))
);

--> statement-breakpoint
CREATE TABLE "party_contacts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "party_contacts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"party_id" bigint NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"value_normalized" text NOT NULL,
	"verified_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "party_contacts_party_kind_value_key" UNIQUE("party_id","kind","value_normalized")
);

--> statement-breakpoint
CREATE TABLE "person_profiles" (
	"party_id" bigint PRIMARY KEY NOT NULL,
	"party_kind" text DEFAULT 'person' NOT NULL,
	"full_name" text NOT NULL,
	"tax_id" text,
	"birth_date" date,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "person_profiles_tax_id_key" UNIQUE("tax_id"),
	CONSTRAINT "person_profiles_party_kind_check" CHECK (party_kind = 'person')
);

--> statement-breakpoint
ALTER TABLE "company_ownerships" ADD CONSTRAINT "company_ownerships_company_fkey" FOREIGN KEY ("company_party_id") REFERENCES "public"."company_profiles"("party_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "company_ownerships" ADD CONSTRAINT "company_ownerships_owner_fkey" FOREIGN KEY ("owner_party_id") REFERENCES "public"."parties"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "company_profiles" ADD CONSTRAINT "company_profiles_party_fkey" FOREIGN KEY ("party_id","party_kind") REFERENCES "public"."parties"("id","kind") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "party_contacts" ADD CONSTRAINT "party_contacts_party_fkey" FOREIGN KEY ("party_id") REFERENCES "public"."parties"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "person_profiles" ADD CONSTRAINT "person_profiles_party_fkey" FOREIGN KEY ("party_id","party_kind") REFERENCES "public"."parties"("id","kind") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
-- @load sql/parties/constraints.sql
