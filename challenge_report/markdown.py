"""The report as Markdown (report.md of the Markdown zip), from the content's JSON: the same sections and tables
as the HTML, its figures as files beside it (figures/NAME.png). A running challenge's notice heads every
section."""

from __future__ import annotations

from typing import Any

from common.units import gigabits_per_second_text, rate_text, size_text

from .templatetags.report_format import pairs, when


def _cell(value: Any) -> str:
    text = "—" if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table (an empty one says so)."""
    if not rows:
        return ["_none_", ""]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return [*lines, ""]


def _place(row: dict[str, Any]) -> str:
    return f"{row['link']['from']} → {row['link']['to']}" if row["link"] else f"{row['site']} {row['direction']}"


def _targets(rows: list[dict[str, Any]]) -> list[str]:
    return table(
        ["Activity", "Where", "Mode", "Target", "Average", "Max", "Stable", "Volume", "Files ok / failed", "Verdict"],
        [
            [
                r["activity"],
                _place(r),
                r["mode"],
                rate_text(r["target_rate"]),
                rate_text(r["average_rate"]),
                rate_text(r["max_rate"]),
                rate_text(r["stable_rate"]),
                size_text(r["volume"]),
                f"{r['files_ok']} / {r['files_failed']}",
                r["verdict"] + ("" if r["window_ended"] else " (so far)"),
            ]
            for r in rows
        ],
    )


def _introduction(c: dict[str, Any]) -> list[str]:
    i = c["introduction"]
    lines = ["## 1. Introduction", "", i["goal"] or "", ""]
    lines += [
        f"**When:** {when(i['start'])} to {when(i['end'])} UTC. **Experiments:** "
        f"{', '.join(i['experiments']) or '—'}. **Sites:** {', '.join(i['sites']) or '—'}. "
        f"**Targets:** {i['targets']}.",
        "",
    ]
    lines += table(
        ["Activity", "Experiment", "Mode", "Kind", "From", "Start", "End", "Targets"],
        [
            [
                a["name"],
                a["experiment"],
                a["mode"],
                a["kind"],
                a["source"],
                when(a["start"]),
                when(a["end"]),
                a["targets"],
            ]
            for a in i["activities"]
        ],
    )
    if i["compared_with"]:
        e = i["compared_with"]
        lines += [
            f"Compared with {e['name']}: {e['activities']} activities, {e['targets']} targets adding up to "
            f"{rate_text(e['target_rate_total'])} (this one: {rate_text(e['target_rate_total_now'])}).",
            "",
        ]
    return lines


def _experiment(number: int, x: dict[str, Any]) -> list[str]:
    lines = [f"### 2.{number} {x['experiment']}", "", *_targets(x["targets"])]
    lines += [f"![{name}](figures/{name})" for name in x["figures"]] + [""]
    f = x["failures"]
    lines += ["#### Failure anatomy", "", f"{f['failures']} failed transfers.", ""]
    lines += table(["Category", "Failures"], [[r["label"], r["failures"]] for r in f["by_category"]])
    lines += table(
        ["FTS category", "Scope", "Phase", "Failures"],
        [[r["category"], r["scope"], r["phase"], r["failures"]] for r in f["fts_causes"]],
    )
    lines += table(
        ["Link", "Message", "Count"],
        [[f"{r['source']} → {r['destination']}", r["message"][:160], r["count"]] for r in f["messages"]],
    )
    n = x.get("narrative")
    lines += [f"#### What {x['experiment']} tells", ""]
    if not n:
        return [*lines, f"_No report from {x['experiment']}._", ""]
    lines += [f"_{n['status']}_", "", n["narrative"], ""]
    lines += [f"- problem: {p['description']}" + (f" ({p['ticket']})" if p["ticket"] else "") for p in n["problems"]]
    lines += [f"- action: {when(a['taken_at'])}: {a['description']}" for a in n["actions"]]
    return [*lines, ""]


def events_window_text(window: dict[str, Any]) -> str:
    """The span the alerts and FTS's optimizer decisions were read over, as the page and the Markdown say it."""
    return f"from {when(window['start'])} to {when(window['end'])} UTC"


def _central(s: dict[str, Any], window: dict[str, Any]) -> list[str]:
    lines = ["## 3. Central services", "", "### FTS: the optimizer per link", ""]
    lines += [f"_FTS's optimizer decisions {events_window_text(window)}._", ""]
    lines += table(
        ["Link", "Target", "Average", "Decisions", "Actives allowed", "Limits seen", "Limited by at the end"],
        [
            [
                f"{r['source']} → {r['destination']}",
                rate_text(r["target_rate"]),
                rate_text(r["average_rate"]),
                r["decisions"],
                f"{r['active_min']} to {r['active_max']}" if r["decisions"] else None,
                pairs(r["limits_seen"]),
                r["limited_by"],
            ]
            for r in s["links"]
        ],
    )
    lines += ["### Failures by FTS category, scope and phase", ""]
    lines += table(
        ["Category", "Scope", "Phase", "Failures"],
        [[r["category"], r["scope"], r["phase"], r["failures"]] for r in s["fts_failures"]],
    )
    lines += ["### Rucio: the injection plans", ""]
    lines += table(
        ["Activity", "Source RSE", "Destination RSE", "Rate (Mbps)", "Start", "End"],
        [
            [p["activity"], p["src_rse"], p["dest_rse"], p["inject_rate"], when(p["start_time"]), when(p["end_time"])]
            for p in s["injection_plans"]
        ],
    )
    return lines


def _ticket(problem: dict[str, Any]) -> str:
    return f"[{problem['ticket']}]({problem['ticket_url']})" if problem["ticket_url"] else problem["ticket"]


def _site(number: int, s: dict[str, Any]) -> list[str]:
    tape = ", tape" if s["tape"] else ""
    lines = [f"### 4.{number} {s['site']} (tier {s['tier']}, {s['country']}{tape})", ""]
    lines += table(
        ["Experiment", "In", "Rate in", "Out", "Rate out"],
        [
            [
                t["experiment"],
                size_text(t["in_volume"]),
                rate_text(t["in_rate"]),
                size_text(t["out_volume"]),
                rate_text(t["out_rate"]),
            ]
            for t in s["traffic"]
        ],
    )
    if s["tape_runs"]:
        lines += ["#### Tape", ""]
        lines += table(
            ["Experiment", "Mode", "Run", "Target", "Achieved", "Files", "From tape", "Mounts"],
            [
                [
                    t["experiment"],
                    t["mode"],
                    t["run"],
                    rate_text(t["target_rate"]),
                    rate_text(t["achieved_rate"]),
                    t["files"],
                    t["files_from_tape"],
                    t["mounts"],
                ]
                for t in s["tape_runs"]
            ],
        )
    r = s["report"]
    if not r:
        return [*lines, "_No site report submitted._", ""]
    lines += [f"#### What {s['site']} reported ({r['status']})", "", r["notes"], ""]
    lines += [f"- outage {when(o['start'])} to {when(o['end'])}: {o['reason']}" for o in r["outages"]]
    lines += [
        f"- problem ({p['category']}): {p['description']}" + (f" (ticket {_ticket(p)})" if p["ticket"] else "")
        for p in r["problems"]
    ]
    lines += [f"- action {when(a['taken_at'])}: {a['description']}" for a in r["actions"]]
    return [*lines, ""]


def _grid(g: dict[str, Any], cell: Any) -> list[str]:
    rows = [[line["source"], *[cell(value) if value else None for value in line["cells"]]] for line in g["rows"]]
    return [f"#### {g['title']}", "", *table(["FROM \\ TO", *g["destinations"]], rows)]


def _network(c: dict[str, Any]) -> list[str]:
    lines = ["## 6. The network", ""]
    for w in c["network"]:
        lines += [f"### Sweep “{w['sweep']}” ({w['state']})", ""]
        if w.get("measured_by"):
            lines += [f"_{'; '.join(w['measured_by']).capitalize()}._", ""]
        for g in w["functional"]:
            lines += _grid(g, lambda v: "OK" if v["ok"] else (v["short_error"] or v["error"]))
        for g in w["throughput"]:
            lines += _grid(g, lambda v: rate_text(v["aggregate_rate"]))
        if w["network"]:
            lines += _grid(
                w["network"],
                lambda v: v["error"][:60] or f"{gigabits_per_second_text(v['iperf3_rate'])}, MTU {v['path_mtu']}",
            )
    return lines if c["network"] else [*lines, "_No network sweep in this challenge._", ""]


def _rest(c: dict[str, Any]) -> list[str]:
    lines = ["## 5. The challenge as it happened", "", f"_Alerts {events_window_text(c['events_window'])}._", ""]
    lines += table(
        ["When", "What", "About", ""],
        [[when(e["at"]), e["kind"], e["subject"], e["text"][:200]] for e in c["timeline"]],
    )
    lines += _network(c)
    lessons = c["lessons"]
    coordinators = lessons.get("coordinators") or {}
    lines += ["## 7. Lessons learned and next steps", "", coordinators.get("lessons", ""), "", "### Lessons", ""]
    lines += [f"- **{item['who']}:** {item['text']}" for item in lessons["lessons"]] or ["_None told._"]
    lines += ["", "### Next steps", "", coordinators.get("next_steps", ""), ""]
    lines += [f"- **{item['who']}:** {item['text']}" for item in lessons["next_steps"]] or ["_None told._"]
    m = c["summary"]
    t = m["total"]
    lines += [
        "",
        "## 8. Summary",
        "",
        f"{t['targets']} targets: {t['met']} met, {t['partly']} partly met, {t['missed']} missed.",
        "",
    ]
    for key, title in (("by_experiment", "Experiment"), ("by_site", "Site")):
        lines += table(
            [title, "Met", "Partly", "Missed", "Other"],
            [[r[title.lower()], r["met"], r["partly"], r["missed"], pairs(r["other"])] for r in m[key]],
        )
    lines += ["## Appendix: the definitions of the figures", ""]
    for d in c["definitions"]:
        lines += [f"### {d['title']}", "", d["markdown"], ""]
    return lines


def report_markdown(c: dict[str, Any]) -> str:
    notice = [f"> **{c['notice']}**", ""] if c["notice"] else []
    lines = [
        f"# {c['challenge']['name']}: the challenge report",
        "",
        f"Generated by the Data Challenge Portal, figures at {when(c['at'])} UTC. Rates: GB/s = 10^9 bytes per "
        "second (networks in Gb/s); all times UTC.",
        "",
        *notice,
    ]
    lines += _introduction(c) + notice + ["## 2. The experiments' perspective", ""]
    for number, x in enumerate(c["experiments"], 1):
        lines += _experiment(number, x)
    lines += (
        notice + _central(c["central_services"], c["events_window"]) + notice + ["## 4. The sites' perspective", ""]
    )
    for number, s in enumerate(c["sites"], 1):
        lines += _site(number, s)
    lines += notice + _rest(c)
    return "\n".join(lines).rstrip() + "\n"
