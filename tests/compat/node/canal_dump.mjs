// Reads the global binlog with go-mysql's canal (prebuilt in the npm package go-mysql-js) from
// binlog.000001:4 and prints one JSON line per rows event: {"schema", "table", "insert" |
// "update" | "delete"} as go-mysql-js gives them (column names from canal's table schema, which
// it asks the server for: SHOW FULL COLUMNS, SHOW INDEX). Exits 0 after N changes, 1 on an error
// or when the timeout passes first.
// Usage: node canal_dump.mjs HOST PORT USER PASSWORD N TIMEOUT_S
import goMysql from 'go-mysql-js';

const MysqlBinlog = goMysql.default; // a CommonJS module: its ES default is under .default

const [host, port, user, password, wanted, timeoutS] = process.argv.slice(2);
const limit = Number(wanted);
let seen = 0;
let finished = false;
let syncer = null;

function finish(code, message) {
  if (finished) return;
  finished = true;
  if (message) process.stderr.write(message + '\n');
  const done = () => process.stdout.write('', () => process.exit(code));
  if (syncer) syncer.close().then(done, done);
  else done();
}

setTimeout(() => finish(1, `timeout after ${seen} of ${limit} row changes`), Number(timeoutS) * 1000);

try {
  syncer = await MysqlBinlog.create({
    hostname: host,
    port: Number(port),
    username: user,
    password,
    tableRegexes: ['.*\\..*'],
    binlogPosition: { name: 'binlog.000001', position: 4 },
  });
} catch (err) {
  finish(1, `canal could not start: ${err}`);
}
if (syncer) {
  syncer.on('event', (event) => {
    if (finished) return;
    const line = { schema: event.table.schema, table: event.table.name };
    for (const kind of ['insert', 'update', 'delete']) {
      if (event[kind] !== undefined) line[kind] = event[kind];
    }
    process.stdout.write(JSON.stringify(line) + '\n');
    seen += 1;
    if (seen >= limit) finish(0);
  });
  syncer.on('error', (err) => finish(1, `canal error after ${seen} row changes: ${err}`));
}
