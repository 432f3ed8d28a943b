"""The route matrix as one self-contained HTML file: per category the grid coloured by label,
its legend and edge probes; a details panel that shows a row's kernel, every candidate's
verdict, bytes and native calls when a cell is hovered or clicked; against a baseline the
changed, added and removed cells marked and the change groups listed after the grids in a
collapsible panel, each linking to its cells.

No network: inline CSS and one small inline script, no external fonts or URLs. Every text
that comes from rows is escaped for HTML (`html.escape`), the characters HTML forbids in a
document replaced by U+FFFD (`html_text`); the row data the script reads is
JSON inside a `<script type="application/json">` element with `<`, `>` and `&` written as
JSON escapes, so no value can close the element. The bytes depend only on the input.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from routectl.io.terminal import counted
from routectl.review.compare import CheckOutcome
from routectl.review.matrix import CHANGE_MARKS, CellRow, Label, Matrix, Transition, value_text
from routectl.review.report import group_title, show_field


@dataclass(frozen=True)
class ChangeGroup:
    """A group of changed rows as the review lists it: a title (its signature), the row
    patterns that name its rows, and the qualified ids."""

    title: str
    patterns: tuple[str, ...]
    ids: tuple[str, ...]


# What HTML forbids in a document's text (the HTML standard's "Parsing HTML documents",
# its input stream's parse errors): NUL, the C0 controls but tab, line feed, form feed and
# carriage return, DELETE and the C1 controls, the noncharacters (U+FDD0-U+FDEF and the last
# two code points of every plane) and surrogates (in a str always lone: UTF-8 cannot encode
# them, so the page could not even be written).
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef\ud800-\udfff"
    + "".join(f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17))
    + "]"
)
REPLACEMENT = "\ufffd"


def html_text(text: str) -> str:
    """`text` with every character HTML forbids replaced by U+FFFD (visibly: a reviewer sees
    that the value held something, where a removed character would hide it)."""
    return FORBIDDEN.sub(REPLACEMENT, text)


def esc(value: Any) -> str:
    return html.escape(html_text(str(value)), quote=True)


def script_json(data: Any) -> str:
    """JSON safe inside a script element: `</script>`, `<!--` and `&` cannot appear."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _hue(index: int) -> int:
    return (index * 137 + 200) % 360  # golden-angle steps: neighbours get distant hues


def _label_style(label: Label, index: int) -> str:
    if label.kind == "error":
        return "background:#f4b4b4;color:#5a0000"
    if label.kind in ("status", "none"):
        return "background:#e6e6e6;color:#555"
    return f"background:hsl({_hue(index)},65%,78%);color:#111"


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#111;
background:#fafafa}
header,main{padding:0 20px}
h1{font-size:20px;margin:16px 0 4px}
h2{font-size:17px;margin:24px 0 6px}
h3{font-size:15px;margin:16px 0 6px}
nav a{margin-right:12px}
.layout{display:flex;gap:20px;align-items:flex-start}
.content{flex:1 1 auto;min-width:0}
#details{position:sticky;top:0;flex:0 0 380px;max-height:100vh;overflow:auto;background:#fff;
border-left:1px solid #ccc;padding:8px 12px;font-size:12px}
#details h2{margin-top:4px}
#details h2,#details p,#details pre{overflow-wrap:anywhere}
.basis{color:#555;margin:0 0 8px;max-width:900px}
.grid-wrap{overflow-x:auto}
table{border-collapse:collapse}
table.grid th,table.grid td{border:1px solid #fff;padding:0}
table.grid thead th{background:#eee;font-weight:600;font-size:11px;padding:2px 4px}
table.grid tbody th{background:#f3f3f3;font-weight:normal;font-size:12px;padding:0 6px;
text-align:left;white-space:nowrap}
table.grid td{width:26px;height:22px;text-align:center;font:600 12px ui-monospace,monospace;
cursor:pointer}
td.changed,td.added,td.removed{outline:3px solid #d00;outline-offset:-3px}
td.removed{opacity:.55}
td.hl{outline:3px solid #000;outline-offset:-3px}
td.sel{box-shadow:inset 0 0 0 2px #000}
table.legend td,table.probes td,table.changes td,table.changes th,table.probes th,
table.legend th{padding:2px 8px;border-bottom:1px solid #e4e4e4;text-align:left;
vertical-align:top}
.sym{font:600 12px ui-monospace,monospace;text-align:center;min-width:22px;display:inline-block}
table.probes tr{cursor:pointer}
.mark{color:#d00;font-weight:700}
code,pre{font:12px ui-monospace,monospace}
pre{white-space:pre-wrap;margin:2px 0}
.ok{color:#060}.no{color:#a00}
"""

SCRIPT = """
(function(){
var data=JSON.parse(document.getElementById('routectl-data').textContent);
var body=document.getElementById('detail-body');
function el(tag,text,cls){var e=document.createElement(tag);if(text!==undefined&&text!==null)
e.textContent=String(text);if(cls)e.className=cls;return e;}
function kv(obj){return Object.keys(obj).sort().map(function(k){
return k+'='+JSON.stringify(obj[k]);}).join(' ');}
function calls(title,list){if(!list)return;body.appendChild(el('h3',title+' ('+list.length+')'));
list.forEach(function(c){body.appendChild(el('pre',c.op+'  '+kv(c.plan||{})));});}
function verdicts(list,chosen){if(!list||!list.length)return;
body.appendChild(el('h3','Candidates, priority order'));var t=el('table');
list.forEach(function(v){var r=el('tr');r.appendChild(el('td',v.name));
var state=v.ok?(v.name===chosen?'chosen':(v.not_needed?'ok, not needed':'ok')):'refused';
r.appendChild(el('td',state,v.ok?'ok':'no'));
r.appendChild(el('td',v.ok?'':'['+v.code+'] '+v.message));t.appendChild(r);});
body.appendChild(t);}
function route(rt,depth){if(!rt){body.appendChild(el('p','(no route)'));return;}
if(rt.error)body.appendChild(el('p','error ['+rt.error.code+'] '+rt.error.message,'no'));
if('kernel' in rt)body.appendChild(el('p','kernel: '+(rt.kernel||'none')));
if(rt.status)body.appendChild(el('p','status ['+rt.status.code+'] '+rt.status.message));
if('prepared_layout' in rt)
body.appendChild(el('p','prepared layout: '+(rt.prepared_layout||'none')));
verdicts(rt.verdicts,rt.kernel);
if(rt.bytes){body.appendChild(el('h3','Bytes'));var b=rt.bytes;
body.appendChild(el('pre','total '+(b.total===undefined?'?':b.total.toLocaleString('en-US'))));
['tensors','scratch'].forEach(function(g){var m=b[g]||{};Object.keys(m).sort().forEach(function(k){
body.appendChild(el('pre','  '+g+' '+k+': '+m[k].toLocaleString('en-US')));});});}
if(rt.fallbacks&&rt.fallbacks.length){body.appendChild(el('h3','Fallbacks'));
rt.fallbacks.forEach(function(f){body.appendChild(el('pre',f.field+': '+JSON.stringify(f.requested)+
' -> '+JSON.stringify(f.effective)+' ('+f.reason+')'));});}
calls('Prepare',rt.prepare);calls('Dispatch',rt.dispatch);
if(rt.stages){body.appendChild(el('h3','Stages per token count'));rt.stages.forEach(function(s){
body.appendChild(el('pre','M='+s.m+': '+s.chosen.join(' > ')));
s.rejected.forEach(function(v){
body.appendChild(el('pre','    refused '+v.name+' ['+v.code+'] '+v.message));});});}
if(rt.layers){Object.keys(rt.layers).forEach(function(n){body.appendChild(el('h3','Layer '+n));
route(rt.layers[n],depth+1);});}
var known=['error','kernel','status','prepared_layout','verdicts','bytes','fallbacks','prepare',
'dispatch','stages','layers'];Object.keys(rt).sort().forEach(function(k){if(known.indexOf(k)<0){
body.appendChild(el('h3',k));body.appendChild(el('pre',JSON.stringify(rt[k],null,1)));}});}
var selected=null;
function show(n,pin){var row=data.rows[n];if(!row)return;body.textContent='';
body.appendChild(el('h2',row.id));body.appendChild(el('p',row.symbol+'  '+row.label));
if(row.change){
body.appendChild(el('p',row.change+(row.old_label?' (before: '+row.old_label+')':''),'no'));}
body.appendChild(el('p',row.reason));route(row.route,0);
if(row.change==='changed'){body.appendChild(el('h3','Before'));route(row.old_route,0);}
if(pin){if(selected)selected.classList.remove('sel');selected=document.getElementById('r'+n);
if(selected)selected.classList.add('sel');}}
document.addEventListener('click',function(e){var t=e.target.closest('[data-row]');
if(t){show(+t.getAttribute('data-row'),true);return;}
var g=e.target.closest('[data-group]');if(g){var id=g.getAttribute('data-group');
document.querySelectorAll('td.hl').forEach(function(c){c.classList.remove('hl');});
document.querySelectorAll('[data-groups~="'+id+'"]').forEach(function(c){c.classList.add('hl');});}});
function fromHash(){var m=/^#r([0-9]+)$/.exec(location.hash);if(m)show(+m[1],true);}
window.addEventListener('hashchange',fromHash);fromHash();
document.addEventListener('mouseover',function(e){var t=e.target.closest('td[data-row]');
if(t&&!selected)show(+t.getAttribute('data-row'),false);});
})();
"""


class _Page:
    """Accumulates the document and the row data the script reads."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.rows: list[dict[str, Any]] = []

    def row(self, matrix: Matrix, cell: CellRow) -> int:
        self.rows.append(
            {
                "id": f"{matrix.category}:{cell.id}",
                "label": cell.label.text,
                "symbol": matrix.symbol(cell.label),
                "change": cell.change,
                "old_label": None if cell.old_label is None else cell.old_label.text,
                "reason": cell.reason,
                "route": cell.route,
                "old_route": cell.old_route if cell.change == "changed" else None,
            }
        )
        return len(self.rows) - 1


def _cell_attrs(
    page: _Page, matrix: Matrix, cell: CellRow, cat: int, groups: Mapping[str, list[str]]
) -> tuple[str, int]:
    n = page.row(matrix, cell)
    classes = [f"k{cat}-{matrix.entry(cell.label).index}"]
    if cell.change:
        classes.append(cell.change)
    title = f"{cell.id}: {cell.label.text}" + (f" ({cell.change})" if cell.change else "")
    group_ids = groups.get(f"{matrix.category}:{cell.id}", [])
    extra = f' data-groups="{esc(" ".join(group_ids))}"' if group_ids else ""
    return (f'id="r{n}" class="{" ".join(classes)}" data-row="{n}" title="{esc(title)}"{extra}'), n


def _cell_groups(matrix: Matrix, membership: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The change groups of each grid cell, by its qualified id: a collapsed cell is in the
    groups of every row it stands for (in group order), so that each group highlights it."""
    members: dict[str, list[str]] = {}
    for row_id, shown in matrix.shown_by.items():
        members.setdefault(shown, []).append(row_id)
    out: dict[str, list[str]] = {}
    for cell in matrix.grid.values():
        found = {
            g
            for row_id in members.get(cell.id, [cell.id])
            for g in membership.get(f"{matrix.category}:{row_id}", ())
        }
        if found:
            out[f"{matrix.category}:{cell.id}"] = sorted(found, key=lambda g: int(g[1:]))
    return out


def _grid(page: _Page, matrix: Matrix, cat: int, groups: Mapping[str, list[str]]) -> str:
    if not matrix.grid:
        return "<p>No matrix rows.</p>"
    out = ['<div class="grid-wrap"><table class="grid"><thead>']
    depth = len(matrix.cols_dims)
    for level, dim in enumerate(matrix.cols_dims):
        out.append("<tr>")
        if level == 0:
            for rdim in matrix.rows_dims:
                out.append(f'<th rowspan="{depth}" scope="col">{esc(rdim)}</th>')
        spans: list[list[Any]] = []
        for key in matrix.col_keys:
            prefix = key[: level + 1]
            if spans and spans[-1][0] == prefix:
                spans[-1][1] += 1
            else:
                spans.append([prefix, 1])
        for prefix, count in spans:
            text = value_text(dim, prefix[-1])
            out.append(
                f'<th colspan="{count}" scope="colgroup">{esc(text)}</th>'
                if count > 1
                else f'<th scope="col">{esc(text)}</th>'
            )
        out.append("</tr>")
    out.append("</thead><tbody>")
    for rkey in matrix.row_keys:
        out.append("<tr>")
        out.extend(
            f'<th scope="row">{esc(value_text(d, v))}</th>'
            for d, v in zip(matrix.rows_dims, rkey, strict=True)
        )
        for ckey in matrix.col_keys:
            cell = matrix.grid.get((rkey, ckey))
            if cell is None:
                out.append("<td></td>")
                continue
            attrs, _ = _cell_attrs(page, matrix, cell, cat, groups)
            mark = CHANGE_MARKS[cell.change] if cell.change else ""
            out.append(f"<td {attrs}>{esc(matrix.symbol(cell.label))}{esc(mark)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _legend(matrix: Matrix, cat: int) -> str:
    out = [
        '<table class="legend"><thead><tr><th>symbol</th><th>'
        + esc(matrix.shows)
        + "</th><th>rows</th></tr></thead><tbody>"
    ]
    for entry in matrix.legend:
        out.append(
            f'<tr><td><span class="sym k{cat}-{entry.index}">{esc(entry.symbol)}'
            f"</span></td><td>{esc(entry.label.text)}</td><td>{entry.cells}</td></tr>"
        )
    out.append("</tbody></table>")
    if matrix.compared:
        out.append(
            "<p>"
            + ", ".join(
                f'<span class="mark">{esc(m)}</span> {esc(c)}' for c, m in CHANGE_MARKS.items()
            )
            + " against the baseline (outlined cells).</p>"
        )
    return "".join(out)


def _probes(page: _Page, matrix: Matrix, cat: int, groups: Mapping[str, list[str]]) -> str:
    if not matrix.probes:
        return ""
    out = [
        f"<h3>Edge probes ({len(matrix.probes)})</h3>",
        '<table class="probes"><thead><tr><th>probe</th><th></th><th>selected</th>'
        "<th>deciding reason</th></tr></thead><tbody>",
    ]
    for probe in matrix.probes:
        attrs, _ = _cell_attrs(page, matrix, probe, cat, groups)
        mark = CHANGE_MARKS[probe.change] if probe.change else ""
        out.append(
            f"<tr><td>{esc(probe.id)}</td><td {attrs}>"
            f"{esc(matrix.symbol(probe.label))}{esc(mark)}</td>"
            f"<td>{esc(probe.label.text)}</td><td>{esc(probe.reason)}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def transition_groups(matrices: Sequence[Matrix]) -> list[ChangeGroup]:
    """Change groups from the matrices' label transitions, for callers without the review's
    signature groups."""
    groups: list[ChangeGroup] = []
    for matrix in matrices:
        for t in matrix.transitions:
            groups.append(
                ChangeGroup(
                    _transition_title(matrix, t), (), tuple(f"{matrix.category}:{i}" for i in t.ids)
                )
            )
    return groups


def _transition_title(matrix: Matrix, t: Transition) -> str:
    old = t.old.text if t.old else "none"
    new = t.new.text if t.new else "none"
    if t.change == "changed" and t.old == t.new:
        return f"{matrix.category}: {new} (other fields moved)"
    if t.change == "changed":
        return f"{matrix.category}: {old} -> {new}"
    return f"{matrix.category}: {t.change} ({new if t.change == 'added' else old})"


def _changes(groups: Sequence[ChangeGroup], cell_ids: Mapping[str, int]) -> str:
    if not groups:
        return (
            '<section id="changes"><h2>Changes</h2><p>No changes against the baseline.</p>'
            "</section>"
        )
    rows = len({i for g in groups for i in g.ids})
    # A panel after the grids, folded: a long list of groups never pushes the grids down.
    out = [
        '<details id="changes"><summary>'
        f"Change groups: {len(groups)}, {counted(rows, 'row')}</summary>"
        '<table class="changes"><thead><tr>'
        "<th>change</th><th>rows</th><th>row pattern</th></tr></thead><tbody>"
    ]
    for n, group in enumerate(groups):
        first = next((cell_ids[i] for i in group.ids if i in cell_ids), None)
        link = (
            f'<a href="#r{first}" data-group="g{n}">{esc(group.title)}</a>'
            if first is not None
            else esc(group.title)
        )
        patterns = "<br>".join(f"<code>{esc(p)}</code>" for p in group.patterns) or "<br>".join(
            f"<code>{esc(i)}</code>" for i in group.ids[:8]
        ) + (f"<br>and {len(group.ids) - 8} more" if len(group.ids) > 8 else "")
        out.append(f"<tr><td>{link}</td><td>{len(group.ids)}</td><td>{patterns}</td></tr>")
    out.append("</tbody></table></details>")
    return "".join(out)


def _notes(matrix: Matrix) -> str:
    """What the declared invariances collapsed (a `*` cell stands for every value), one
    paragraph."""
    if not matrix.notes:
        return ""
    return '<p class="note">' + "<br>".join(esc(n.strip()) for n in matrix.notes) + "</p>"


def render_html(
    matrices: Sequence[Matrix],
    *,
    title: str,
    subtitle: str,
    basis: Mapping[str, str] | None = None,
    groups: Sequence[ChangeGroup] | None = None,
) -> str:
    """The whole report. `groups` (given a baseline) are listed after the grids, in a
    collapsible panel, and each links to its cells; without them, a compared report lists
    the label transitions."""
    compared = any(m.compared for m in matrices)
    if compared and groups is None:
        groups = transition_groups(matrices)
    membership: dict[str, list[str]] = {}
    for n, group in enumerate(groups or ()):
        for row_id in group.ids:
            membership.setdefault(row_id, []).append(f"g{n}")
    page = _Page()
    styles: list[str] = []
    sections = []
    for cat, matrix in enumerate(matrices):
        styles.extend(
            f".k{cat}-{e.index}{{{_label_style(e.label, e.index)}}}" for e in matrix.legend
        )
        what = esc(matrix.shows)
        sections.append(
            f'<section class="category" id="cat-{esc(matrix.category)}">'
            f"<h2>{esc(matrix.category)}</h2>"
            f'<p class="basis">{esc((basis or {}).get(matrix.category, ""))}</p>'
            f"<p>{counted(matrix.total_rows, 'row')}: {matrix.grid_rows} in the grid "
            f"(rows {esc(' × '.join(matrix.rows_dims))}, columns "
            f"{esc(' × '.join(matrix.cols_dims))}; each cell the {what}), "
            f"{counted(len(matrix.probes), 'edge probe')}.</p>"
            + _notes(matrix)
            + _grid(page, matrix, cat, _cell_groups(matrix, membership))
            + _legend(matrix, cat)
            + _probes(page, matrix, cat, membership)
            + "</section>"
        )
    cell_ids = {row["id"]: n for n, row in enumerate(page.rows)}
    for matrix in matrices:
        # A row a collapsed cell stands for links to that cell.
        qualified = f"{matrix.category}:"
        for row_id, shown in matrix.shown_by.items():
            cell_ids.setdefault(qualified + row_id, cell_ids[qualified + shown])
    nav = " ".join(f'<a href="#cat-{esc(m.category)}">{esc(m.category)}</a>' for m in matrices)
    changes = _changes(groups or (), cell_ids) if compared else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}{''.join(styles)}</style></head>\n"
        f"<body><header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p><nav>{nav}</nav></header>\n"
        '<div class="layout"><main class="content">'
        f"{''.join(sections)}{changes}</main>"
        '<aside id="details"><h2>Row details</h2><div id="detail-body">'
        "<p>Hover over or click a cell or probe to see its candidates, bytes and native "
        "calls.</p></div></aside></div>\n"
        f'<script type="application/json" id="routectl-data">{script_json({"rows": page.rows})}'
        f"</script>\n<script>{SCRIPT}</script>\n</body></html>\n"
    )


def review_groups(outcome: CheckOutcome) -> list[ChangeGroup]:
    """The change groups as `check` prints them: title, signature and row patterns."""
    groups = []
    for name, verdict in outcome.categories.items():
        for group in verdict.groups:
            fields = "; ".join(show_field(f, full=True) for f in group.fields)
            title = f"{name}: {group_title(group)}" + (f": {fields}" if fields else "")
            groups.append(ChangeGroup(title, tuple(group.patterns or ()), group.qualified_ids))
    return groups


def render_report_page(
    project_name: str,
    built: Sequence[Matrix],
    *,
    basis: Mapping[str, str],
    against: str | None,
    outcome: CheckOutcome | None,
) -> str:
    """`routectl report --html`: the matrices of a project as one page, with the review's
    change groups when judged `against` a baseline."""
    count = counted(len(built), "category", "categories")
    rows = sum(m.total_rows for m in built)
    changes = f"; changes against {against}" if against is not None else ""
    return render_html(
        built,
        title=f"routectl route report: {project_name}",
        subtitle=f"{count}, {counted(rows, 'row')}, replayed on CPU with native doubles{changes}",
        basis=dict(basis),
        groups=None if outcome is None else review_groups(outcome),
    )
