CREATE TABLE "invitation_brokers" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "invitation_brokers_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"invitation_id" bigint NOT NULL,
	"broker_id" bigint NOT NULL,
	"role" text NOT NULL,
	"access_profile_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	CONSTRAINT "invitation_brokers_invitation_id_broker_id_key" UNIQUE("invitation_id","broker_id"),
	CONSTRAINT "invitation_brokers_role_check" CHECK (role IN ('master', 'member'))
);

--> statement-breakpoint
CREATE TABLE "invitation_deliveries" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "invitation_deliveries_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"invitation_id" bigint NOT NULL,
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
	"requested_by_user_id" bigint NOT NULL,
	CONSTRAINT "invitation_deliveries_uid_key" UNIQUE("uid"),
	CONSTRAINT "invitation_deliveries_provider_message_key" UNIQUE("provider","provider_message_id"),
	CONSTRAINT "invitation_deliveries_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "invitation_deliveries_channel_check" CHECK (channel IN ('email', 'sms', 'whatsapp')),
	CONSTRAINT "invitation_deliveries_status_check" CHECK (status IN ('queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'complained'))
);

--> statement-breakpoint
CREATE TABLE "invitation_delivery_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "invitation_delivery_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"tenant_id" bigint NOT NULL,
	"delivery_id" bigint NOT NULL,
	"status" text NOT NULL,
	"occurred_at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"dedup_key" text NOT NULL,
	"payload" jsonb DEFAULT '{}'::jsonb NOT NULL,
	CONSTRAINT "invitation_delivery_events_dedup_key" UNIQUE("delivery_id","dedup_key"),
	CONSTRAINT "invitation_delivery_events_payload_check" CHECK (jsonb_typeof(payload) = 'object' AND octet_length(payload::text) < 64000)
);

--> statement-breakpoint
CREATE TABLE "invitation_session_contexts" (
	"invitation_id" bigint PRIMARY KEY NOT NULL,
	"tenant_id" bigint NOT NULL,
	"session_context_id" bigint NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

--> statement-breakpoint
CREATE TABLE "invitations" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "invitations_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"uid" text NOT NULL,
	"tenant_id" bigint NOT NULL,
	"channel" text NOT NULL,
	"destination" text NOT NULL,
	"destination_normalized" text NOT NULL,
	"token_sha256" "bytea" NOT NULL,
	"access_profile_id" bigint,
	"access_profile_scope" text DEFAULT 'tenant' NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_by_user_id" bigint NOT NULL,
	"created_by_membership_id" bigint,
	"created_at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"accepted_at" timestamp with time zone,
	"accepted_by_user_id" bigint,
	"accepted_membership_id" bigint,
	"revoked_at" timestamp with time zone,
	"revoked_by_user_id" bigint,
	CONSTRAINT "invitations_uid_key" UNIQUE("uid"),
	CONSTRAINT "invitations_token_sha256_key" UNIQUE("token_sha256"),
	CONSTRAINT "invitations_id_tenant_id_key" UNIQUE("id","tenant_id"),
	CONSTRAINT "invitations_channel_check" CHECK (channel IN ('email', 'phone')),
	CONSTRAINT "invitations_status_check" CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
	CONSTRAINT "invitations_access_profile_scope_check" CHECK (access_profile_scope = 'tenant')
);

--> statement-breakpoint
ALTER TABLE "invitation_brokers" ADD CONSTRAINT "invitation_brokers_invitation_fkey" FOREIGN KEY ("invitation_id","tenant_id") REFERENCES "public"."invitations"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_brokers" ADD CONSTRAINT "invitation_brokers_broker_fkey" FOREIGN KEY ("tenant_id","broker_id") REFERENCES "public"."tenant_brokers"("tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_brokers" ADD CONSTRAINT "invitation_brokers_profile_fkey" FOREIGN KEY ("access_profile_id","tenant_id","broker_id") REFERENCES "public"."access_profiles"("id","tenant_id","broker_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_deliveries" ADD CONSTRAINT "invitation_deliveries_invitation_fkey" FOREIGN KEY ("invitation_id","tenant_id") REFERENCES "public"."invitations"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_deliveries" ADD CONSTRAINT "invitation_deliveries_requested_by_fkey" FOREIGN KEY ("requested_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_delivery_events" ADD CONSTRAINT "invitation_delivery_events_delivery_fkey" FOREIGN KEY ("delivery_id","tenant_id") REFERENCES "public"."invitation_deliveries"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_session_contexts" ADD CONSTRAINT "invitation_session_contexts_invitation_fkey" FOREIGN KEY ("invitation_id","tenant_id") REFERENCES "public"."invitations"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitation_session_contexts" ADD CONSTRAINT "invitation_session_contexts_context_fkey" FOREIGN KEY ("session_context_id","tenant_id") REFERENCES "public"."session_contexts"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_tenant_fkey" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_profile_fkey" FOREIGN KEY ("access_profile_id","tenant_id","access_profile_scope") REFERENCES "public"."access_profiles"("id","tenant_id","scope") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_created_by_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_created_by_membership_fkey" FOREIGN KEY ("created_by_membership_id","created_by_user_id","tenant_id") REFERENCES "public"."memberships"("id","user_id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_accepted_by_fkey" FOREIGN KEY ("accepted_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_accepted_membership_fkey" FOREIGN KEY ("accepted_membership_id","tenant_id") REFERENCES "public"."memberships"("id","tenant_id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_revoked_by_fkey" FOREIGN KEY ("revoked_by_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
CREATE UNIQUE INDEX "invitations_pending_key" ON "invitations" USING btree ("tenant_id","channel","destination_normalized") WHERE status = 'pending';
--> statement-breakpoint
-- @load sql/invitations/constraints.sql
