import { readFileSync } from "node:fs";                 // node route.mjs fits/routing-table.json implement
const t = JSON.parse(readFileSync(process.argv[2], "utf8"));
if (t.schema.split(".")[0] !== "routing-table/v1" || t.schema === "routing-table/v1")
  throw new Error(`unsupported table schema ${t.schema} (this reader needs v1.1: per-member gate tests)`);
const star = t.regions["*"], region = t.regions[process.argv[3]] ?? star;      // unknown region -> global pool
const floor = t.constants.min_quality, s0 = t.static;                            // quality floor (null: none)
const below = (m) => floor != null && m.quality < floor;
const rank = (a, b) => below(a) - below(b) || (below(a) ? b.quality - a.quality : b.value - a.value)
  || b.quality - a.quality || (a.cost_usd ?? Infinity) - (b.cost_usd ?? Infinity) || (a.config < b.config ? -1 : 1);
const pool = region.members.map((m) => m.config), n = Object.fromEntries(star.members.map((m) => [m.config, m.n_ratings]));
const mostRated = (keys) => [...keys].sort((a, b) => (n[b] ?? 0) - (n[a] ?? 0) || (a < b ? -1 : 1))[0];
let s = s0.cheap_config && s0.frontier_config ? s0.cheap_config : s0.default_config ?? mostRated(Object.keys(n));
if (!pool.includes(s)) s = mostRated(pool);                                      // the static choice, in the pool
let choice = s;
for (const level of region === star ? [star] : [region, star]) {                // the region, then the global pool
  const ranked = level.members.filter((m) => pool.includes(m.config)).sort(rank), i = ranked.findIndex((m) => m.config === s);
  if (i === 0) break;                                                            // the static choice ranks first
  const won = (i < 0 ? ranked : ranked.slice(0, i)).find((m) => m.gate?.[s]?.passes);  // evidence gate
  if (won) { choice = won.config; break; }
}
console.log(choice, t.version);
