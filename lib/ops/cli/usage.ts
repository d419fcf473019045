/** The CLI's help text. */
export const USAGE = `Usage: unique-jobs <command> [options]

Locks
  locks list [pattern]          Held locks. pattern: a digest prefix (v1:ab12…, or bare hex) or a glob (*, ?)
      --queue <name>              only locks of this queue
      --kind enqueue|runtime      only this kind of lock
      --job-id <id>               only locks held by this job
      --limit <n>                 at most n locks (default 50, max 1000)
      --cursor <cursor>           continue a previous listing
  locks show <digest>           Every key of a digest, with its owner jobs (state, name, data)
  locks release <digest>        Delete a digest's lock keys; prints what it would do unless --yes
      --kind enqueue|runtime      only this kind of lock
      --yes                       really delete

Dead set (rejected duplicates)
  dead list                     Entries, newest first (--limit, --offset)
  dead retry <id>               Enqueue an entry again under its lock (the entry stays if the lock is still held).
                                Describe the job's lock when it is not the default (until_executed, lockLimit 1):
      --lock <type> --lock-limit <n> --lock-ttl <ms> --unique-across queues,names
  dead delete <id>              Delete an entry; prints what it would do unless --yes

Idempotency
  keys show <key>               The record of an idempotency key (Redis store)
      --scope <scope>             the key's scope, or --queue <queue> --name <job name> (default scope "queue:name",
                                  ":<bull prefix>:queue:name" under a --bull-prefix other than bull)
      --key-json <json>           the key as a JSON string instead of <key> (e.g. '"evt\\u0000x"' for a NUL)
      --scope-json <json>         the scope as a JSON string instead of --scope

Maintenance
  reap [--dry-run]              Release orphaned locks and idempotency claims (--dry-run: only report them)
      --queue <name>              only this queue's deduplication keys (default: every queue found)
      --grace <seconds>           wait between finding an orphan and releasing it if it still is one (default
                                  15, min 1): a lock taken by an enqueue in progress is not an orphan (an
                                  addBulk locks all its entries first: ~1 s per 10,000; keep 15 if unsure)

Digests
  digest <queue> <name> <json>  The digest and lock keys a job with this data gets (no Redis needed)
      --lock-args a,b.c           lockArgs picks these fields as an array: (data) => [data.a, data.b.c]
      --lock-args-json <json>     what lockArgs returns, as JSON (any other shape)
      --unique-across queues,names --lock <type> --lock-limit <n>

Options
  --redis <url>         Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --cluster             the URL is a node of a Redis Cluster
  --prefix <prefix>     the library's key prefix (default: uniquejobs)
  --bull-prefix <p>     BullMQ's key prefix (default: bull)
  --max-scans <n>       when nothing is found: SCAN calls spent looking for other prefixes that hold
                        the library's keys (default 50, of 1000 keys each)
  --registered-queues   look only in the queues the application recorded under --prefix (one read) instead
                        of scanning the whole key space for BullMQ queues (seconds with millions of keys)
  --timeout <seconds>   how long Redis may take to answer before the CLI reports it unreachable (exit code 2):
                        connecting (default 10) and each command (default 15)
  --json                machine-readable output (errors as JSON on stderr)
  -h, --help            this help

Every "nothing found" answer says where the command looked (prefix, BullMQ prefix, queues, store) and which other
prefixes hold the library's keys.

Exit codes: 0 done (a lookup that finds nothing is done: it exits 0 and says where it looked), 1 usage error or a
change that could not be made (an entry that does not exist, a retried entry whose lock is still held), 2 Redis
unreachable.`;
