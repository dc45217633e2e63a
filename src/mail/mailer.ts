// The mail port: units send e-mail through a Mailer. The default transport only logs (without the
// body, which may carry personal data); a real transport is plugged in by the executable with
// useMailer() when one exists.
import type { Logger } from 'pino';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

/** Logs that a message would be sent: recipient domain and subject only. */
export function loggingMailer(logger: Logger): Mailer {
  return {
    async send(message) {
      const domain = message.to.includes('@') ? message.to.slice(message.to.lastIndexOf('@') + 1) : '(none)';
      logger.info({ mail: { toDomain: domain, subject: message.subject, bytes: Buffer.byteLength(message.text) } }, 'mail sent (logging transport)');
    },
  };
}

let configured: Mailer | undefined;

/** Installs the process's transport; undefined goes back to the logging transport. */
export function useMailer(mailer: Mailer | undefined): void {
  configured = mailer;
}

/** The installed transport, or a logging transport writing to `logger`. */
export function mailerFor(logger: Logger): Mailer {
  return configured ?? loggingMailer(logger);
}
