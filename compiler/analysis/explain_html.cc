// The explain page: one self-contained HTML file (inline CSS, JS and SVG; nothing fetched).
//   1. The report becomes one JSON object inside <script type="application/json">, every '<'
//      written as \u003c so no string can close the script element.
//   2. The script draws one SVG per phase (forward, backward, optimizer bands side by side):
//      a node's row is its depth along edges inside its phase (longest path), rows wrap at a
//      fixed width so a 5,000-node graph stays a few thousand SVG rectangles; edges are drawn
//      only below kEdgeLimit nodes (a checkbox draws them on larger graphs).
//   3. Colour is the layout of the node's first output (linear, R-Tile, unknown); explicit
//      transformation nodes get a red outline, eliminated ones are dimmed.
//   4. Three tables (tensors, transformation nodes, launches) follow; then the script writes
//      <div id="fbl-rendered" data-nodes="N">, which the render test looks for.
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/analysis/explain.h"

namespace fbl::analysis {

namespace {

nlohmann::json pageData(const ExplainReport& r) {
  using nlohmann::json;
  json nodes = json::array(), tensors = json::array(), launches = json::array(), tr = json::array();
  for (const ExplainNode& n : r.nodes) {
    nodes.push_back({{"n", n.name}, {"o", n.op}, {"p", n.phase}, {"c", n.cls}, {"l", n.layout},
                     {"t", n.transform}, {"f", n.flops}, {"in", n.preds}});
    if (!n.transform.empty()) tr.push_back({n.name, n.op, n.phase, n.transform, n.reason});
  }
  for (const ExplainTensor& t : r.tensors)
    tensors.push_back({t.name, t.dtype, t.shape, t.role, t.bytes, t.layout + " (" + t.storage + ")", t.why});
  for (const ExplainLaunch& l : r.launches)
    launches.push_back({l.phase, l.kernel, l.node, l.kind, l.bytes, l.flops});
  return {{"model", r.model},       {"profile", r.profile}, {"strategy", r.strategy}, {"memory", r.memory},
          {"section", r.hasSection}, {"summary", r.transforms.is_null() ? json::object() : r.transforms},
          {"nodes", nodes},         {"tensors", tensors},   {"transforms", tr},
          {"launches", launches}};
}

constexpr const char* kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fblc explain</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
#bands{display:flex;gap:12px;align-items:flex-start;overflow-x:auto}
.band{border:1px solid #ccc;padding:6px;background:#fafafa}
.band h3{margin:0 0 4px;font-size:13px}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px;border:1px solid #555}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#eee;position:sticky;top:0} td.r{text-align:right}
.scroll{max-height:420px;overflow:auto;border:1px solid #ccc}
</style></head><body>
<h1>fblc explain</h1><div id="summary"></div>
<div class="legend"><span><i class="sw" style="background:#6b8fd6"></i>linear output</span>
<span><i class="sw" style="background:#f0932b"></i>R-Tile output</span>
<span><i class="sw" style="background:#bbb"></i>layout unknown</span>
<span><i class="sw" style="background:#fff;border:2px solid #d00"></i>explicit transformation</span>
<span><i class="sw" style="background:#6b8fd6;opacity:.25"></i>eliminated transformation</span>
<label><input type="checkbox" id="edges"> edges</label></div>
<div id="bands"></div>
<h2>Transformation nodes</h2><div class="scroll" id="t-transforms"></div>
<h2>Tensors</h2><div class="scroll" id="t-tensors"></div>
<h2>Launches</h2><div class="scroll" id="t-launches"></div>
<script type="application/json" id="fbl-data">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
(function(){
var D=JSON.parse(document.getElementById('fbl-data').textContent);
var NS='http://www.w3.org/2000/svg', kEdgeLimit=1500, kPerRow=40, kCell=14, kBox=10;
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function human(x){var u=['','K','M','G','T'],i=0;while(x>=1000&&i<4){x/=1000;i++;}return i?x.toPrecision(3)+u[i]:String(x);}
var s=D.summary||{};
document.getElementById('summary').innerHTML=esc(D.model)+' &middot; profile '+esc(D.profile)+' &middot; strategy '+
  esc(D.strategy||'unknown')+' &middot; '+D.nodes.length+' nodes, '+D.launches.length+' launches'+
  (s.total!==undefined?' &middot; transformations: '+s.total+' total, '+s.eliminated+' eliminated, '+s.explicit+' explicit':'')+
  (D.section?'':' &middot; <b>no explain section: layouts unknown (recompile the plan)</b>')+
  (D.memory?'<br>'+esc(D.memory):'');
var phases=['forward','backward','optimizer'], pos=new Array(D.nodes.length), svgs={};
phases.forEach(function(ph){
  var ids=[];D.nodes.forEach(function(n,i){if(n.p===ph)ids.push(i);});
  if(!ids.length)return;
  var depth={},maxd=0;
  ids.forEach(function(i){var d=0;D.nodes[i].in.forEach(function(p){if(D.nodes[p].p===ph&&depth[p]!==undefined)d=Math.max(d,depth[p]+1);});depth[i]=d;maxd=Math.max(maxd,d);});
  var byDepth=[];ids.forEach(function(i){(byDepth[depth[i]]=byDepth[depth[i]]||[]).push(i);});
  var widest=1;byDepth.forEach(function(l){if(l)widest=Math.max(widest,Math.min(l.length,kPerRow));});
  var row=0,svg=document.createElementNS(NS,'svg'),w=widest*kCell+8;
  byDepth.forEach(function(list){if(!list)return;for(var k=0;k<list.length;k++){var i=list[k];
    if(k>0&&k%kPerRow===0)row++;
    var x=4+(k%kPerRow)*kCell,y=4+row*kCell,n=D.nodes[i];pos[i]=[x+kBox/2,y+kBox/2,ph];
    var r=document.createElementNS(NS,'rect');r.setAttribute('x',x);r.setAttribute('y',y);
    r.setAttribute('width',kBox);r.setAttribute('height',kBox);
    r.setAttribute('fill',n.l==='rtile'?'#f0932b':n.l==='linear'?'#6b8fd6':'#bbb');
    if(n.t==='explicit'){r.setAttribute('stroke','#d00');r.setAttribute('stroke-width','2');}
    if(n.t==='eliminated')r.setAttribute('opacity','0.25');
    var t=document.createElementNS(NS,'title');t.textContent=n.n+' ('+n.o+', '+n.c+')'+(n.t?' '+n.t:'')+', '+human(n.f)+' FLOPs';
    r.appendChild(t);svg.appendChild(r);}row++;});
  svg.setAttribute('width',w);svg.setAttribute('height',row*kCell+8);
  var band=document.createElement('div');band.className='band';
  band.innerHTML='<h3>'+ph+' ('+ids.length+' nodes, '+(maxd+1)+' levels)</h3>';
  band.appendChild(svg);document.getElementById('bands').appendChild(band);svgs[ph]=svg;
});
var drawn=false;
function drawEdges(){if(drawn)return;drawn=true;D.nodes.forEach(function(n,i){n.in.forEach(function(p){
  if(!pos[p]||!pos[i]||pos[p][2]!==pos[i][2])return;var l=document.createElementNS(NS,'line');
  l.setAttribute('x1',pos[p][0]);l.setAttribute('y1',pos[p][1]);l.setAttribute('x2',pos[i][0]);l.setAttribute('y2',pos[i][1]);
  l.setAttribute('stroke','#0003');svgs[pos[i][2]].insertBefore(l,svgs[pos[i][2]].firstChild);});});}
var box=document.getElementById('edges');
box.onchange=function(){if(box.checked)drawEdges();Object.keys(svgs).forEach(function(k){
  svgs[k].querySelectorAll('line').forEach(function(l){l.style.display=box.checked?'':'none';});});};
if(D.nodes.length<=kEdgeLimit){box.checked=true;drawEdges();}
function table(id,head,rows,right){var h=['<table><tr>'];head.forEach(function(c){h.push('<th>'+c+'</th>');});h.push('</tr>');
  rows.forEach(function(r){h.push('<tr>');r.forEach(function(c,j){h.push(right.indexOf(j)>=0?'<td class="r">'+human(c)+'</td>':'<td>'+esc(c)+'</td>');});h.push('</tr>');});
  h.push('</table>');document.getElementById(id).innerHTML=h.join('');}
table('t-transforms',['node','op','phase','decision','reason'],D.transforms,[]);
table('t-tensors',['tensor','dtype','shape','role','bytes','layout','why'],D.tensors.map(function(t){return [t[0],t[1],'['+t[2].join(',')+']',t[3],t[4],t[5],t[6]];}),[4]);
table('t-launches',['#','phase','kernel','node','kind','bytes','FLOPs'],D.launches.map(function(l,i){return [String(i)].concat(l);}),[5,6]);
var m=document.createElement('div');m.id='fbl-rendered';m.setAttribute('data-nodes',String(D.nodes.length));
m.textContent='rendered '+D.nodes.length+' nodes';document.body.appendChild(m);
})();
</script></body></html>
)HTML";

}  // namespace

std::string renderExplainHtml(const ExplainReport& r) {
  // Invalid UTF-8 in a name is replaced, not thrown on.
  const std::string data = pageData(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(data.size());
  for (char c : data) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);  // '<' only occurs in strings
  return std::string(kHead) + safe + kTail;
}

}  // namespace fbl::analysis
