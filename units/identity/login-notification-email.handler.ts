// identity.login_notification_email: tells a user about a new login. Subscriber of
// identity.session_started v1 on the critical queue. Still registered, although nothing publishes the
// event while login is being rebuilt.
import { z } from 'zod';
import { defineSubscriber } from '../../src/work/index.ts';
import { mailerFor } from '../../src/mail/mailer.ts';

export const loginNotificationEmail = defineSubscriber({
  name: 'identity.login_notification_email',
  event: { type: 'identity.session_started', version: 1 },
  queue: 'critical',
  context: 'tenant',
  concurrency: 4,
  timeoutSeconds: 30,
  payload: z.object({
    userId: z.string().regex(/^[1-9][0-9]*$/),
    email: z.email(),
    occurredAt: z.iso.datetime({ offset: true }),
    ipAddress: z.string().max(64).optional(),
    userAgent: z.string().max(512).optional(),
  }),
  async handler(payload, run) {
    const where = [payload.ipAddress, payload.userAgent].filter(Boolean).join(', ');
    await mailerFor(run.logger).send({
      to: payload.email,
      subject: 'New login to your account',
      text: `A new login to your account happened at ${payload.occurredAt}${where ? ` (${where})` : ''}. If it was not you, change your password.`,
    });
    return { notified: true };
  },
});
