// Reads the global binlog with zongji (@vlasky/zongji) and prints one JSON line per row event:
// {"event": "writerows"|"updaterows"|"deleterows", "schema", "table", "columns", "rows"}.
// Exits 0 after N row events, 1 on an error or when the timeout passes first.
// With --at-end it starts at the end of the binlog (SHOW BINARY LOGS), prints
// {"ready": file, "position": pos} once the dump is requested, and exits.
// Usage: node zongji_dump.mjs HOST PORT USER PASSWORD N TIMEOUT_S [--at-end]
import ZongJi from '@vlasky/zongji';

const [host, port, user, password, wanted, timeoutS, mode] = process.argv.slice(2);
const atEnd = mode === '--at-end';
const limit = Number(wanted);
let seen = 0;

// BigInt (BIGINT beyond 2^53), Buffer (BLOB) and Date (DATETIME) have no plain JSON form.
function plain(key, value) {
  if (typeof value === 'bigint') return value.toString();
  if (value && value.type === 'Buffer' && Array.isArray(value.data)) {
    return { hex: Buffer.from(value.data).toString('hex') };
  }
  return value;
}

let finished = false;
function finish(code, message) {
  if (finished) return;
  finished = true;
  if (message) process.stderr.write(message + '\n');
  zongji.stop();
  // A pipe that is full takes writes asynchronously: exit once everything is flushed.
  process.stdout.write('', () => process.exit(code));
}

const zongji = new ZongJi({ host, port: Number(port), user, password });

zongji.on('binlog', (event) => {
  const name = event.getEventName();
  if (name === 'tablemap') return;
  const table = event.tableMap[event.tableId];
  const line = {
    event: name,
    schema: table.parentSchema,
    table: table.tableName,
    columns: table.columnSchemas.map((c) => c.COLUMN_NAME),
    rows: event.rows,
  };
  if (finished) return;
  process.stdout.write(JSON.stringify(line, plain) + '\n');
  seen += 1;
  if (seen >= limit) finish(0);
});

zongji.on('ready', () => {
  if (!atEnd) return;
  const { filename, position } = zongji.options;
  process.stdout.write(JSON.stringify({ ready: filename, position }) + '\n');
  finish(0);
});

zongji.on('error', (err) => finish(1, `zongji error after ${seen} row events: ${err}`));

setTimeout(
  () => finish(1, `timeout: ${seen} of ${limit} row events in ${timeoutS}s`),
  Number(timeoutS) * 1000,
);

zongji.start({
  serverId: 4242,
  ...(atEnd ? { startAtEnd: true } : { startAtEnd: false, filename: 'binlog.000001', position: 4 }),
  includeEvents: ['tablemap', 'writerows', 'updaterows', 'deleterows'],
});
