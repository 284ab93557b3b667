// The dashboard's one stylesheet, served at /dashboard/style.css (the CSP allows styles from 'self' only).
import { TASK_STATUSES } from '../../core/wire.ts';

export const STYLE = `
:root { --fg:#1d2330; --muted:#6b7385; --bg:#f6f7f9; --card:#fff; --line:#e2e5ea; --accent:#3559e0;
  --working:#2f6fdf; --input_required:#b7791f; --completed:#2f855a; --failed:#c53030; --cancelled:#718096; --paused:#805ad5; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:1.5rem; padding:.6rem 1.2rem; background:#1d2330; color:#fff; }
header a { color:#fff; text-decoration:none; } header .brand { font-weight:700; }
header nav { flex:1; } header form { margin:0; } header .who { color:#cdd3df; font-size:12px; }
button.link { background:none; border:0; color:#cdd3df; cursor:pointer; font:inherit; }
main { padding:1.2rem; max-width:1400px; margin:0 auto; }
h1 { font-size:1.3rem; } h2 { font-size:1.05rem; margin-top:1.6rem; }
code { font:12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.cards { display:flex; flex-wrap:wrap; gap:.6rem; }
.card { background:var(--card); border:1px solid var(--line); border-left:4px solid var(--accent); border-radius:6px;
  padding:.5rem .8rem; min-width:120px; display:flex; flex-direction:column; color:inherit; text-decoration:none; }
.card .n { font-size:1.4rem; font-weight:700; }
${TASK_STATUSES.map((s) => `.card.${s} { border-left-color:var(--${s}); } .badge.${s} { background:var(--${s}); }`).join('\n')}
.badge.paused { background:var(--paused); }
.card.queue { border-left-color:#805ad5; }
.charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(360px, 1fr)); gap:1rem; margin:0 0 1rem; }
figure { margin:0; background:var(--card); border:1px solid var(--line); border-radius:6px; padding:.6rem; }
figcaption { color:var(--muted); font-size:12px; margin-bottom:.3rem; }
.chart { width:100%; height:140px; } .chart text { font-size:10px; fill:var(--muted); }
.chart line.axis, .chart line.tick { stroke:#a0a7b4; stroke-width:1; } .chart line.grid { stroke:var(--line); stroke-dasharray:3 3; }
.ranges { margin:1rem 0 .4rem; color:var(--muted); font-size:13px; }
.ranges a { margin-left:.4rem; padding:.05rem .45rem; border:1px solid var(--line); border-radius:4px; background:var(--card); text-decoration:none; }
.ranges a[aria-current] { background:var(--accent); border-color:var(--accent); color:#fff; }
rect.created, .k.created { fill:#7f9cf5; color:#4c6fe0; } rect.finished, .k.finished { fill:#48bb78; color:#2f855a; }
polyline.backlog { fill:none; stroke:var(--input_required); stroke-width:2; }
.filters { display:flex; flex-wrap:wrap; align-items:end; gap:.8rem; background:var(--card); border:1px solid var(--line);
  border-radius:6px; padding:.6rem .8rem; margin-bottom:1rem; }
.filters fieldset { border:0; padding:0; margin:0; display:flex; gap:.6rem; } .filters legend { color:var(--muted); font-size:12px; }
.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
.filters fieldset label { flex-direction:row; align-items:center; gap:.2rem; color:var(--fg); font-size:13px; }
input, select, button { font:inherit; padding:.25rem .4rem; }
button { border:1px solid var(--line); background:#fff; border-radius:4px; cursor:pointer; }
button.danger { background:var(--failed); color:#fff; border-color:var(--failed); } button[disabled] { opacity:.6; cursor:default; }
table.tasks, table.artifacts, table.attempts, table.events { width:100%; border-collapse:collapse; background:var(--card); border:1px solid var(--line); }
table.tasks th, table.tasks td, table.artifacts th, table.artifacts td, table.attempts th, table.attempts td, table.events th, table.events td {
  text-align:left; padding:.35rem .6rem; border-bottom:1px solid var(--line); white-space:nowrap; }
table.events td { vertical-align:top; } table.events td.payload { white-space:normal; overflow-wrap:anywhere; width:100%; }
table.events td.payload code { white-space:pre-wrap; }
table.artifacts td.name { white-space:normal; overflow-wrap:anywhere; }
table.tasks td.msg { white-space:normal; color:var(--muted); max-width:320px; }
.badge { color:#fff; border-radius:10px; padding:.05rem .5rem; font-size:12px; white-space:nowrap; vertical-align:middle; }
.muted, .empty { color:var(--muted); }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; background:var(--card); border:1px solid var(--line);
  border-radius:6px; padding:.8rem; } dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
ol.timeline { list-style:none; padding:0; border-left:2px solid var(--line); margin-left:.4rem; }
ol.timeline li { padding:.2rem 0 .2rem .8rem; } ol.timeline time { color:var(--muted); font-size:12px; margin-right:.4rem; }
pre.outcome { background:#1d2330; color:#e2e8f0; padding:.8rem; border-radius:6px; overflow:auto; max-height:420px; }
body.login main { max-width:360px; margin:12vh auto; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:1.5rem; }
body.login label { display:flex; flex-direction:column; gap:.3rem; margin-bottom:.8rem; } .error { color:var(--failed); }
table.attempts td { vertical-align:top; } table.attempts td.error { white-space:normal; max-width:640px; overflow-wrap:anywhere; }
.error-message { color:var(--failed); }
.outcome { border-radius:4px; padding:0 .35rem; background:#edf2f7; font-size:12px; }
.outcome.completed { background:#c6f6d5; } .outcome.failed, .outcome.crash_retry, .outcome.lease_lost { background:#fed7d7; }
.outcome.paused, .outcome.parked, .outcome.input_required, .outcome.handed_back { background:#fefcbf; }
.outcome.running { background:#bee3f8; }
.outcome.stuck { background:#feb2b2; font-weight:600; } .card.queue.stuck { border-left-color:#c53030; }
details.stack summary, details.steps summary { cursor:pointer; color:var(--muted); }
details.stack pre { font-size:12px; background:#f1f3f6; padding:.5rem; overflow:auto; max-height:260px; }
ol.timeline details { display:inline-block; vertical-align:top; } details.steps summary { color:var(--fg); } details.steps ol { list-style:none; padding-left:1rem; margin:.2rem 0; }
details.steps .count { color:var(--accent); }
pre.arguments { background:var(--card); border:1px solid var(--line); padding:.8rem; border-radius:6px; overflow:auto; max-height:420px; }
section.waiting, section.paused { border:1px solid var(--input_required); border-left-width:4px; background:#fffbeb; border-radius:6px;
  padding:.4rem .9rem; margin:.8rem 0; font-size:15px; }
section.paused { border-color:var(--paused); background:#faf5ff; }
.actions { display:flex; gap:.6rem; margin:1rem 0; }
a.button, span.button { display:inline-block; border:1px solid var(--line); background:#fff; border-radius:4px; padding:.3rem .7rem;
  color:var(--fg); text-decoration:none; }
a.button.danger { background:var(--failed); color:#fff; border-color:var(--failed); }
a.button.primary, button.primary { background:var(--accent); color:#fff; border-color:var(--accent); }
span.button.disabled { opacity:.6; }
section.confirm { max-width:760px; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:1rem 1.4rem; }
form.confirm { display:flex; flex-direction:column; align-items:flex-start; gap:.7rem; }
form.confirm label { display:flex; flex-direction:column; gap:.2rem; }
`;
