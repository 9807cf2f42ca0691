// build.sh smoke test: run as /sandbox/main.ts through sandbox.command.
import Papa from "papaparse";
import { parse } from "csv-parse/sync";
import { stringify } from "csv-stringify/sync";
import pg from "pg";
import postgres from "postgres";
import { addDays, formatISO } from "date-fns";
import { z } from "zod";
import { writeFileSync } from "node:fs";

interface Row { name: string; n: number }
const rows: Row[] = Papa.parse<Row>("name,n\na,1\nb,2", { header: true, dynamicTyping: true }).data;
const parsed = parse("x,y\n1,2", { columns: true }) as Record<string, string>[];
const schema = z.object({ name: z.string(), n: z.number() });
rows.forEach((r) => schema.parse(r));
if (parsed[0].y !== "2" || typeof pg.Client !== "function" || typeof postgres !== "function") throw new Error("bad");
writeFileSync("/data/smoke.csv", stringify(rows, { header: true }));
console.log(formatISO(addDays(new Date(0), 1), { representation: "date" }), process.getuid?.(), process.cwd());
console.log("smoke ok");
