/**
 * The worker thread of thread.ts: opens a `memory:` store as openStore does, and answers the main
 * thread's statements in the order they come. A transaction stays open inside PGlite's own
 * `transaction` until the main thread ends it (commit, or roll back when its function threw).
 */
import { parentPort } from 'node:worker_threads';
import type { Db, Queryable } from './db.js';
import { openStore } from './open.js';
import { errorFields, type Answer, type Ask } from './thread.js';

const port = parentPort!;
let db: Db | undefined;
const open = new Map<number, { tx?: Queryable; end: (commit: boolean, id: number) => void }>();
/** Thrown inside a transaction the main thread rolls back: PGlite rolls back and rethrows it. */
const ROLLBACK = new Error('rolled back: the transaction function threw on the main thread');

const answer = (a: Answer) => port.postMessage(a);
const settle = (id: number, p: Promise<unknown>): void =>
  void p.then(
    (value) => answer({ id, ok: true, value }),
    (err: unknown) => answer({ id, ok: false, error: errorFields(err) }),
  );

port.on('message', (m: Ask) => {
  switch (m.op) {
    case 'open':
      return settle(
        m.id,
        openStore('memory:').then((d) => {
          db = d;
          return null;
        }),
      );
    case 'query': {
      const target = m.tx === undefined ? db : open.get(m.tx)?.tx;
      if (!target)
        return answer({ id: m.id, ok: false, error: errorFields(new Error('no such store or transaction')) });
      return settle(m.id, target.query(m.sql, m.params));
    }
    case 'begin': {
      let began!: () => void;
      const begun = new Promise<void>((resolve) => (began = resolve));
      let endId = 0;
      let finish!: (commit: boolean) => void;
      const ended = new Promise<boolean>((resolve) => (finish = resolve));
      const entry: { tx?: Queryable; end: (commit: boolean, id: number) => void } = {
        end: (commit, id) => {
          endId = id;
          finish(commit);
        },
      };
      open.set(m.id, entry);
      const done = db!.transaction(async (tx) => {
        entry.tx = tx;
        began();
        if (!(await ended)) throw ROLLBACK;
      });
      // BEGIN failed: the transaction never began; say so to `begin`.
      void Promise.race([
        begun.then(() => true),
        done.then(
          () => false,
          () => false,
        ),
      ]).then((ok) => {
        if (ok) answer({ id: m.id, ok: true, value: m.id });
      });
      done.then(
        () => {
          open.delete(m.id);
          answer({ id: endId, ok: true, value: null });
        },
        (err: unknown) => {
          open.delete(m.id);
          if (!entry.tx) answer({ id: m.id, ok: false, error: errorFields(err) });
          else if (err === ROLLBACK) answer({ id: endId, ok: true, value: null });
          else answer({ id: endId, ok: false, error: errorFields(err) });
        },
      );
      return;
    }
    case 'end': {
      const entry = open.get(m.tx);
      if (!entry) return answer({ id: m.id, ok: false, error: errorFields(new Error('no such transaction')) });
      return entry.end(m.commit, m.id);
    }
    case 'close':
      return settle(m.id, db ? db.close() : Promise.resolve());
  }
});
