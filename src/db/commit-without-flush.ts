// Transactions on the delivery path that need not wait for the disk: the relay's pass (rows
// marked sent, their `sent` trail rows) and a worker's usual registration (run `running`, its
// `received` row). Each sets synchronous_commit off for its own transaction only, so its COMMIT
// returns once the commit is in PostgreSQL's WAL buffers, without waiting for the flush; the WAL writer
// flushes it within a few hundred ms. Every other transaction keeps the server's setting, above all a
// run's effect transaction and a dispatch: what they commit is never taken back.
//
// Why this loses nothing a user relies on: WAL is written and flushed in order. The effect transaction
// of a run commits after its registration and after the relay's pass that sent it, and its COMMIT
// waits for the flush of everything before it. So a registration or a `sent` mark is durable as soon as
// any later transaction that wrote something has committed the normal way (a COMMIT that wrote nothing
// flushes nothing: every path that acknowledges a message commits a write first, a claim, a row lock, a
// transition or a finish). Only a crash within that short window (a PostgreSQL process dying abnormally,
// an immediate shutdown, the machine, a failover: these commits do not wait for standbys) can take one
// back, and what is left is the state of a crash just before it: a row still pending whose message went
// out (the delivery records the send itself, or the relay sends a second message, which finds the run
// executing or finished), or a run not yet `running` whose message comes back and runs again under the
// same attempt number. A reader may have seen the state that was taken back. docs/guarantees.md ("What a
// database crash can take back") and test/integration/worker-database-crash.test.ts.
//
// Measured (bench/results/hot-path-levers-2026-11-24.md): at 200 runs/s the flushes of
// these commits queued behind each other and behind the effects'; without them the steady p50 fell by
// about a sixth, and the idle path from registration to `started` by 0.3 ms.

/** SQL for a select list: makes the current transaction commit without waiting for its WAL flush. */
export const COMMIT_WITHOUT_FLUSH = `set_config('synchronous_commit', 'off', true)`;
