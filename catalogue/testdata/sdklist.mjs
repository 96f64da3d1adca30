// sdklist.mjs times the Claude Agent SDK's listSessions() for
// BenchmarkVersusSDK (sdk_bench_test.go), which installs the SDK into a
// cache folder and runs this with node:
//
//	CLAUDE_CONFIG_DIR=<corpus root> node sdklist.mjs <sdk.mjs path> <rows out> [limit]
//
// It prints one JSON line: the time listSessions() took, this process's
// /proc/self/io counters read just before and after it (so module loading
// is not counted), and how many rows and titles it found; the rows go to
// <rows out> (unless it is ""), one JSON line each, for the benchmark to
// compare titles. A limit other than 0 lists that many rows, the newest.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [sdkPath, rowsOut, limit] = process.argv.slice(2);
const { listSessions } = await import(pathToFileURL(sdkPath).href);

function io() {
  const out = {};
  for (const line of readFileSync("/proc/self/io", "utf8").split("\n")) {
    const [k, v] = line.split(":");
    if (v !== undefined) out[k.trim()] = Number(v.trim());
  }
  return out;
}

const io0 = io();
const t0 = performance.now();
const rows = await listSessions(Number(limit) > 0 ? { limit: Number(limit) } : undefined);
const ms = performance.now() - t0;
const io1 = io();

if (rowsOut) writeFileSync(rowsOut, rows.map((r) => JSON.stringify({
  id: r.sessionId, title: r.customTitle ?? "", display: r.summary ?? "",
})).join("\n") + "\n");
console.log(JSON.stringify({
  ms,
  rows: rows.length,
  titles: rows.filter((r) => r.customTitle).length,
  rchar: io1.rchar - io0.rchar,
  readBytes: io1.read_bytes - io0.read_bytes,
}));
