CREATE TABLE "access_profile_permissions" (
	"access_profile_id" bigint NOT NULL,
	"permission_id" bigint NOT NULL,
	CONSTRAINT "access_profile_permissions_pkey" PRIMARY KEY("access_profile_id","permission_id")
);

--> statement-breakpoint
CREATE TABLE "access_profile_template_change_decisions" (
	"change_id" bigint NOT NULL,
	"access_profile_id" bigint NOT NULL,
	"decision" text NOT NULL,
	"affected_users" integer NOT NULL,
	CONSTRAINT "access_profile_template_change_decisions_pkey" PRIMARY KEY("change_id","access_profile_id"),
	CONSTRAINT "access_profile_template_change_decisions_decision_check" CHECK (decision IN ('followed', 'detached'))
);

--> statement-breakpoint
CREATE TABLE "access_profile_template_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "access_profile_template_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"template_id" bigint NOT NULL,
	"from_version" integer NOT NULL,
	"to_version" integer NOT NULL,
	"added_permission_ids" bigint[] NOT NULL,
	"removed_permission_ids" bigint[] NOT NULL,
	"reason" text NOT NULL,
	"changed_by_user_id" bigint NOT NULL,
	"changed_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "access_profile_template_permissions" (
	"template_id" bigint NOT NULL,
	"permission_id" bigint NOT NULL,
	CONSTRAINT "access_profile_template_permissions_pkey" PRIMARY KEY("template_id","permission_id")
);

--> statement-breakpoint
CREATE TABLE "access_profile_templates" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "access_profile_templates_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"description" text NOT NULL,
	"auto_assign" text,
	"version" integer DEFAULT 1 NOT NULL,
	"source_platform_template_id" bigint,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "access_profile_templates_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "access_profile_templates_id_tenant_id_scope_key" UNIQUE("id","tenant_id","scope"),
	CONSTRAINT "access_profile_templates_scope_check" CHECK (scope IN ('tenant', 'broker')),
	CONSTRAINT "access_profile_templates_auto_assign_check" CHECK (auto_assign IN ('tenant_admin', 'broker_master', 'broker_member'))
);

--> statement-breakpoint
CREATE TABLE "access_profiles" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "access_profiles_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"broker_id" bigint,
	"scope" text GENERATED ALWAYS AS (CASE WHEN broker_id IS NULL THEN 'tenant' ELSE 'broker' END) STORED NOT NULL,
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"template_id" bigint,
	"template_version" integer,
	"detached_at" timestamp with time zone,
	"detached_by_user_id" bigint,
	CONSTRAINT "access_profiles_id_tenant_id_broker_id_key" UNIQUE("id","tenant_id","broker_id"),
	CONSTRAINT "access_profiles_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "access_profiles_id_tenant_id_scope_key" UNIQUE("id","tenant_id","scope")
);

--> statement-breakpoint
CREATE TABLE "permission_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "permission_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"permission_code" text NOT NULL,
	"change" text NOT NULL,
	"before" jsonb,
	"after" jsonb,
	"commit_sha" text NOT NULL,
	"commit_author" text NOT NULL,
	"approved_by" text,
	"deployed_by" text NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "permission_changes_change_check" CHECK (change IN ('added', 'modified', 'deprecated', 'renamed')),
	CONSTRAINT "permission_changes_before_check" CHECK (before IS NULL OR jsonb_typeof(before) = 'object'),
	CONSTRAINT "permission_changes_after_check" CHECK (after IS NULL OR jsonb_typeof(after) = 'object')
);

--> statement-breakpoint
CREATE TABLE "permission_use_cases" (
	"permission_id" bigint NOT NULL,
	"use_case" text NOT NULL,
	CONSTRAINT "permission_use_cases_pkey" PRIMARY KEY("permission_id","use_case")
);

--> statement-breakpoint
CREATE TABLE "permissions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "permissions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"code" text NOT NULL,
	"scope" text NOT NULL,
	"description" text NOT NULL,
	"replaces_code" text,
	"introduced_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"deprecated_at" timestamp with time zone,
	CONSTRAINT "permissions_code_key" UNIQUE("code"),
	CONSTRAINT "permissions_scope_check" CHECK (scope IN ('platform', 'tenant', 'broker'))
);

--> statement-breakpoint
CREATE TABLE "platform_access_profile_permissions" (
	"platform_access_profile_id" bigint NOT NULL,
	"permission_id" bigint NOT NULL,
	CONSTRAINT "platform_access_profile_permissions_pkey" PRIMARY KEY("platform_access_profile_id","permission_id")
);

--> statement-breakpoint
CREATE TABLE "platform_access_profile_template_permissions" (
	"template_id" bigint NOT NULL,
	"permission_id" bigint NOT NULL,
	CONSTRAINT "platform_access_profile_template_permissions_pkey" PRIMARY KEY("template_id","permission_id")
);

--> statement-breakpoint
CREATE TABLE "platform_access_profile_templates" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_access_profile_templates_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"blueprint_id" bigint NOT NULL,
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"description" text NOT NULL,
	"auto_assign" text,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "platform_access_profile_templates_scope_check" CHECK (scope IN ('tenant', 'broker')),
	CONSTRAINT "platform_access_profile_templates_auto_assign_check" CHECK (auto_assign IN ('tenant_admin', 'broker_master', 'broker_member'))
);

--> statement-breakpoint
CREATE TABLE "platform_access_profiles" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_access_profiles_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"name" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "platform_access_profiles_name_key" UNIQUE("name")
);

--> statement-breakpoint
CREATE TABLE "platform_grants" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_grants_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" bigint NOT NULL,
	"platform_access_profile_id" bigint NOT NULL,
	"granted_by_user_id" bigint NOT NULL,
	"granted_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"reason" text NOT NULL,
	"revoked_by_user_id" bigint,
	"revoked_at" timestamp with time zone,
	"origin_platform_invitation_id" bigint NOT NULL
);

--> statement-breakpoint
CREATE TABLE "platform_invitation_deliveries" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_invitation_deliveries_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"platform_invitation_id" bigint NOT NULL,
	"channel" text NOT NULL,
	"destination_normalized" text NOT NULL,
	"provider" text NOT NULL,
	"provider_message_id" text,
	"status" text DEFAULT 'queued' NOT NULL,
	"queued_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"sent_at" timestamp with time zone,
	"delivered_at" timestamp with time zone,
	"opened_at" timestamp with time zone,
	"failed_at" timestamp with time zone,
	"failure_reason" text,
	"requested_by_user_id" bigint,
	"requested_by_process" text,
	CONSTRAINT "platform_invitation_deliveries_uid_key" UNIQUE("uid"),
	CONSTRAINT "platform_invitation_deliveries_provider_message_key" UNIQUE("provider","provider_message_id"),
	CONSTRAINT "platform_invitation_deliveries_channel_check" CHECK (channel IN ('email', 'sms', 'whatsapp')),
	CONSTRAINT "platform_invitation_deliveries_status_check" CHECK (status IN ('queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'complained')),
	CONSTRAINT "platform_invitation_deliveries_requester_check" CHECK (num_nonnulls(requested_by_user_id, requested_by_process) = 1)
);

--> statement-breakpoint
CREATE TABLE "platform_invitation_delivery_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_invitation_delivery_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"delivery_id" bigint NOT NULL,
	"status" text NOT NULL,
	"occurred_at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"dedup_key" text NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	CONSTRAINT "platform_invitation_delivery_events_dedup_key" UNIQUE("delivery_id","dedup_key"),
	CONSTRAINT "platform_invitation_delivery_events_payload_check" CHECK (jsonb_typeof(payload) = 'object' AND octet_length(payload::text) < 64000)
);

--> statement-breakpoint
CREATE TABLE "platform_invitations" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_invitations_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"channel" text NOT NULL,
	"destination" text NOT NULL,
	"destination_normalized" text NOT NULL,
	"token_sha256" "bytea" NOT NULL,
	"platform_access_profile_id" bigint NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_by_user_id" bigint,
	"created_by_process" text,
	"accepted_at" timestamp with time zone,
	"accepted_by_user_id" bigint,
	"revoked_at" timestamp with time zone,
	"revoked_by_user_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "platform_invitations_uid_key" UNIQUE("uid"),
	CONSTRAINT "platform_invitations_token_sha256_key" UNIQUE("token_sha256"),
	CONSTRAINT "platform_invitations_channel_check" CHECK (channel IN ('email', 'phone')),
	CONSTRAINT "platform_invitations_status_check" CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
	CONSTRAINT "platform_invitations_creator_check" CHECK (num_nonnulls(created_by_user_id, created_by_process) = 1),
	CONSTRAINT "platform_invitations_token_check" CHECK (octet_length(token_sha256) = 32)
);

--> statement-breakpoint
CREATE TABLE "platform_tenant_blueprints" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "platform_tenant_blueprints_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"name" text NOT NULL,
	"description" text NOT NULL,
	"disabled_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "platform_tenant_blueprints_name_key" UNIQUE("name")
);

--> statement-breakpoint
CREATE TABLE "session_contexts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "session_contexts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"session_id" bigint NOT NULL,
	"platform_grant_id" bigint NOT NULL,
	"tenant_id" bigint NOT NULL,
	"reason" text NOT NULL,
	"entered_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"left_at" timestamp with time zone,
	CONSTRAINT "session_contexts_id_tenant_id_key" UNIQUE("id","tenant_id")
);

--> statement-breakpoint
ALTER TABLE "access_profile_permissions" ADD CONSTRAINT "access_profile_permissions_profile_fkey" FOREIGN KEY ("access_profile_id") REFERENCES "public"."access_profiles"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_permissions" ADD CONSTRAINT "access_profile_permissions_permission_fkey" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_change_decisions" ADD CONSTRAINT "access_profile_template_change_decisions_change_fkey" FOREIGN KEY ("change_id") REFERENCES "public"."access_profile_template_changes"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_change_decisions" ADD CONSTRAINT "access_profile_template_change_decisions_profile_fkey" FOREIGN KEY ("access_profile_id") REFERENCES "public"."access_profiles"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_changes" ADD CONSTRAINT "access_profile_template_changes_template_fkey" FOREIGN KEY ("template_id","tenant_id") REFERENCES "public"."access_profile_templates"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_changes" ADD CONSTRAINT "access_profile_template_changes_changed_by_fkey" FOREIGN KEY ("changed_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_permissions" ADD CONSTRAINT "access_profile_template_permissions_template_fkey" FOREIGN KEY ("template_id") REFERENCES "public"."access_profile_templates"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_template_permissions" ADD CONSTRAINT "access_profile_template_permissions_permission_fkey" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_templates" ADD CONSTRAINT "access_profile_templates_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profile_templates" ADD CONSTRAINT "access_profile_templates_source_fkey" FOREIGN KEY ("source_platform_template_id") REFERENCES "public"."platform_access_profile_templates"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profiles" ADD CONSTRAINT "access_profiles_template_fkey" FOREIGN KEY ("template_id","tenant_id","scope") REFERENCES "public"."access_profile_templates"("id","tenant_id","scope") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profiles" ADD CONSTRAINT "access_profiles_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profiles" ADD CONSTRAINT "access_profiles_detached_by_fkey" FOREIGN KEY ("detached_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "access_profiles" ADD CONSTRAINT "access_profiles_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "permission_use_cases" ADD CONSTRAINT "permission_use_cases_permission_fkey" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_access_profile_permissions" ADD CONSTRAINT "platform_access_profile_permissions_profile_fkey" FOREIGN KEY ("platform_access_profile_id") REFERENCES "public"."platform_access_profiles"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_access_profile_permissions" ADD CONSTRAINT "platform_access_profile_permissions_permission_fkey" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_access_profile_template_permissions" ADD CONSTRAINT "platform_access_profile_template_permissions_template_fkey" FOREIGN KEY ("template_id") REFERENCES "public"."platform_access_profile_templates"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_access_profile_template_permissions" ADD CONSTRAINT "platform_access_profile_template_permissions_permission_fkey" FOREIGN KEY ("permission_id") REFERENCES "public"."permissions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_access_profile_templates" ADD CONSTRAINT "platform_access_profile_templates_blueprint_fkey" FOREIGN KEY ("blueprint_id") REFERENCES "public"."platform_tenant_blueprints"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_grants" ADD CONSTRAINT "platform_grants_user_fkey" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_grants" ADD CONSTRAINT "platform_grants_profile_fkey" FOREIGN KEY ("platform_access_profile_id") REFERENCES "public"."platform_access_profiles"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_grants" ADD CONSTRAINT "platform_grants_granted_by_fkey" FOREIGN KEY ("granted_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_grants" ADD CONSTRAINT "platform_grants_revoked_by_fkey" FOREIGN KEY ("revoked_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_grants" ADD CONSTRAINT "platform_grants_origin_invitation_fkey" FOREIGN KEY ("origin_platform_invitation_id") REFERENCES "public"."platform_invitations"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitation_deliveries" ADD CONSTRAINT "platform_invitation_deliveries_invitation_fkey" FOREIGN KEY ("platform_invitation_id") REFERENCES "public"."platform_invitations"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitation_deliveries" ADD CONSTRAINT "platform_invitation_deliveries_requested_by_fkey" FOREIGN KEY ("requested_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitation_delivery_events" ADD CONSTRAINT "platform_invitation_delivery_events_delivery_fkey" FOREIGN KEY ("delivery_id") REFERENCES "public"."platform_invitation_deliveries"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitations" ADD CONSTRAINT "platform_invitations_profile_fkey" FOREIGN KEY ("platform_access_profile_id") REFERENCES "public"."platform_access_profiles"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitations" ADD CONSTRAINT "platform_invitations_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitations" ADD CONSTRAINT "platform_invitations_accepted_by_fkey" FOREIGN KEY ("accepted_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "platform_invitations" ADD CONSTRAINT "platform_invitations_revoked_by_fkey" FOREIGN KEY ("revoked_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "session_contexts" ADD CONSTRAINT "session_contexts_session_fkey" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "session_contexts" ADD CONSTRAINT "session_contexts_grant_fkey" FOREIGN KEY ("platform_grant_id") REFERENCES "public"."platform_grants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "session_contexts" ADD CONSTRAINT "session_contexts_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "platform_grants_live_key" ON "platform_grants" USING btree ("user_id") WHERE revoked_at IS NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX "session_contexts_live_key" ON "session_contexts" USING btree ("session_id") WHERE left_at IS NULL;
--> statement-breakpoint
-- @load sql/authorization/constraints.sql
