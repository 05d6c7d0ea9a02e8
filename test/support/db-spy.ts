import type { DatabaseService } from '#libs/db';

/**
 * Observe (not replace) the statements a DatabaseService sends: `seen` gets each statement's name
 * (the third argument of `query`, e.g. 'runs.append') and values before it runs. Returns the
 * function that stops observing.
 */
export function observeQueries(db: DatabaseService, seen: (name: string | undefined, values: unknown[] | undefined) => void): () => void {
  const original = db.query;
  const query = db.query.bind(db);
  (db as { query: DatabaseService['query'] }).query = (text, values, name) => {
    seen(name, values);
    return query(text, values, name);
  };
  return () => {
    (db as { query: DatabaseService['query'] }).query = original;
  };
}
