CREATE TABLE "financial_institution_accounts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "financial_institution_accounts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"tenant_account_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"company_code" text NOT NULL,
	"created_by_user_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "financial_institution_accounts_company_code_key" UNIQUE("tenant_id","financial_institution_id","company_code"),
	CONSTRAINT "financial_institution_accounts_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "financial_institution_accounts_id_tenant_institution_key" UNIQUE("id","tenant_id","financial_institution_id")
);

--> statement-breakpoint
CREATE TABLE "financial_institutions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "financial_institutions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"code" text NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "financial_institutions_code_key" UNIQUE("code")
);

--> statement-breakpoint
CREATE TABLE "offers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "offers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"financial_institution_id" bigint NOT NULL,
	"product_id" bigint NOT NULL,
	"operation_type_id" bigint NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "offers_natural_key" UNIQUE("financial_institution_id","product_id","operation_type_id")
);

--> statement-breakpoint
CREATE TABLE "operation_types" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "operation_types_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"code" text NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "operation_types_code_key" UNIQUE("code")
);

--> statement-breakpoint
CREATE TABLE "product_groups" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "product_groups_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"code" text NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "product_groups_code_key" UNIQUE("code")
);

--> statement-breakpoint
CREATE TABLE "product_operation_types" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "product_operation_types_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"product_id" bigint NOT NULL,
	"operation_type_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "product_operation_types_product_id_operation_type_id_key" UNIQUE("product_id","operation_type_id")
);

--> statement-breakpoint
CREATE TABLE "products" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "products_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"product_group_id" bigint NOT NULL,
	"code" text NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "products_code_key" UNIQUE("code")
);

--> statement-breakpoint
CREATE TABLE "tenant_financial_institutions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "tenant_financial_institutions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"financial_institution_id" bigint NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "tenant_financial_institutions_tenant_institution_key" UNIQUE("tenant_id","financial_institution_id")
);

--> statement-breakpoint
ALTER TABLE "financial_institution_accounts" ADD CONSTRAINT "financial_institution_accounts_tenant_account_fkey" FOREIGN KEY ("tenant_account_id","tenant_id") REFERENCES "public"."tenant_accounts"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "financial_institution_accounts" ADD CONSTRAINT "financial_institution_accounts_tenant_institution_fkey" FOREIGN KEY ("tenant_id","financial_institution_id") REFERENCES "public"."tenant_financial_institutions"("tenant_id","financial_institution_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "financial_institution_accounts" ADD CONSTRAINT "financial_institution_accounts_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "offers" ADD CONSTRAINT "offers_financial_institution_fkey" FOREIGN KEY ("financial_institution_id") REFERENCES "public"."financial_institutions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "offers" ADD CONSTRAINT "offers_product_operation_type_fkey" FOREIGN KEY ("product_id","operation_type_id") REFERENCES "public"."product_operation_types"("product_id","operation_type_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "product_operation_types" ADD CONSTRAINT "product_operation_types_product_fkey" FOREIGN KEY ("product_id") REFERENCES "public"."products"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "product_operation_types" ADD CONSTRAINT "product_operation_types_operation_type_fkey" FOREIGN KEY ("operation_type_id") REFERENCES "public"."operation_types"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "products" ADD CONSTRAINT "products_product_group_fkey" FOREIGN KEY ("product_group_id") REFERENCES "public"."product_groups"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_financial_institutions" ADD CONSTRAINT "tenant_financial_institutions_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "tenant_financial_institutions" ADD CONSTRAINT "tenant_financial_institutions_institution_fkey" FOREIGN KEY ("financial_institution_id") REFERENCES "public"."financial_institutions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
-- @load sql/institutions/constraints.sql
