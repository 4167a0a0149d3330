// The explain page: one self-contained HTML file (inline CSS, JS and SVG; nothing fetched).
//   1. The report becomes one JSON object inside <script type="application/json">, every '<'
//      written as \u003c so no string can close the script element.
//   At the top, what a person reads at a glance: the memory against the profile (fits or not),
//   per phase its launches, bytes, FLOPs and, with the profile's roofline, modelled time, and the
//   costliest launches.
//   2. The script draws one SVG per phase (forward, backward, optimizer bands side by side):
//      a node's row is its depth along edges inside its phase (longest path), rows wrap at a
//      fixed width so a 5,000-node graph stays a few thousand SVG rectangles; edges are drawn
//      when the checkbox asks for them (on a first screen they are a hatch of long diagonals).
//   3. Colour is the layout of the node's first output (linear, R-Tile, unknown); explicit
//      transformation nodes get a red outline, eliminated ones are dimmed; each box is labelled
//      with its op, the node's name and FLOPs in its tooltip. Edges are off until asked for.
//   4. Three tables (tensors, transformation nodes, launches) follow, each sortable by a click on
//      a column and filtered by a search box; then the script writes
//      <div id="fbl-rendered" data-nodes="N">, which the render test looks for.
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/report/explain.h"

namespace fbl::report {

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
          {"fits", r.memoryFits},   {"peak_gflops", r.peakGflops}, {"bandwidth_gbs", r.bandwidthGBs},
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
#glance{display:flex;gap:12px;flex-wrap:wrap;margin:8px 0 12px}
.card{border:1px solid #ccc;padding:8px 10px;background:#fcfcfc;min-width:260px}
.card h3{margin:0 0 6px;font-size:13px}
.ok{color:#fff;background:#2e8b57;padding:1px 6px;border-radius:3px}
.bad{color:#fff;background:#c0392b;padding:1px 6px;border-radius:3px}
th{cursor:pointer} th.sorted::after{content:" \25BE"} th.sorted.up::after{content:" \25B4"}
input.filter{margin:0 0 4px;width:280px}
</style></head><body>
<h1>fblc explain</h1><div id="summary"></div>
<div id="glance"><div class="card" id="g-memory"><h3>Memory</h3></div>
<div class="card" id="g-phases"><h3>By phase</h3></div>
<div class="card" id="g-costly"><h3>Costliest launches</h3></div></div>
<div class="legend"><span><i class="sw" style="background:#6b8fd6"></i>linear output</span>
<span><i class="sw" style="background:#f0932b"></i>R-Tile output</span>
<span><i class="sw" style="background:#bbb"></i>layout unknown</span>
<span><i class="sw" style="background:#fff;border:2px solid #d00"></i>explicit transformation</span>
<span><i class="sw" style="background:#6b8fd6;opacity:.25"></i>eliminated transformation</span>
<label><input type="checkbox" id="edges"> edges</label></div>
<div id="bands"></div>
<h2>Transformation nodes</h2><input class="filter" data-for="t-transforms" placeholder="search"><div class="scroll" id="t-transforms"></div>
<h2>Tensors</h2><input class="filter" data-for="t-tensors" placeholder="search"><div class="scroll" id="t-tensors"></div>
<h2>Launches</h2><input class="filter" data-for="t-launches" placeholder="search"><div class="scroll" id="t-launches"></div>
<script type="application/json" id="fbl-data">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
(function(){
var D=JSON.parse(document.getElementById('fbl-data').textContent);
var NS='http://www.w3.org/2000/svg', kPerRow=40, kCell=22, kBox=19;
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function human(x){var u=['','K','M','G','T'],i=0;while(x>=1000&&i<4){x/=1000;i++;}return i?x.toPrecision(3)+u[i]:String(x);}
var s=D.summary||{};
document.getElementById('summary').innerHTML=esc(D.model)+' &middot; profile '+esc(D.profile)+' &middot; strategy '+
  esc(D.strategy||'unknown')+' &middot; '+D.nodes.length+' nodes, '+D.launches.length+' launches'+
  (s.total!==undefined?' &middot; transformations: '+s.total+' total, '+s.eliminated+' eliminated, '+s.explicit+' explicit':'')+
  (D.section?'':' &middot; <b>no explain section: layouts unknown (recompile the plan)</b>')+
  '';
// At a glance: memory, phases, costliest launches. A launch's modelled time is the roofline's
// max(bytes / bandwidth, FLOPs / peak) when the profile gives both.
var roof=D.bandwidth_gbs>0&&D.peak_gflops>0;
function modelMs(l){return roof?Math.max(l[4]/(D.bandwidth_gbs*1e6),l[5]/(D.peak_gflops*1e6)):0;}
document.getElementById('g-memory').innerHTML+='<span class="'+(D.fits?'ok':'bad')+'">'+(D.fits?'fits':'does not fit')+
  '</span> '+esc(D.memory||'no memory figures');
var ph={};D.launches.forEach(function(l){var p=ph[l[0]]=ph[l[0]]||{n:0,b:0,f:0,t:0};p.n++;p.b+=l[4];p.f+=l[5];p.t+=modelMs(l);});
var g=['<table><tr><th>phase</th><th>launches</th><th>bytes</th><th>FLOPs</th>'+(roof?'<th>modelled ms</th>':'')+'</tr>'];
Object.keys(ph).forEach(function(k){var p=ph[k];g.push('<tr><td>'+esc(k)+'</td><td class="r">'+p.n+'</td><td class="r">'+human(p.b)+
  '</td><td class="r">'+human(p.f)+'</td>'+(roof?'<td class="r">'+p.t.toFixed(3)+'</td>':'')+'</tr>');});
g.push('</table>'+(roof?'':'<small>modelled time needs <code>fblc explain --profile</code> with a roofline</small>'));
document.getElementById('g-phases').innerHTML+=g.join('');
var order=D.launches.map(function(l,i){return i;}).sort(function(a,b){
  var x=D.launches[a],y=D.launches[b];return roof?modelMs(y)-modelMs(x):(y[4]-x[4])||(y[5]-x[5]);});
var c=['<table><tr><th>#</th><th>node</th><th>'+(roof?'modelled ms':'bytes')+'</th></tr>'];
order.slice(0,8).forEach(function(i){var l=D.launches[i];c.push('<tr><td class="r">'+i+'</td><td>'+esc(l[2].length>60?l[2].slice(0,57)+'...':l[2])+
  '</td><td class="r">'+(roof?modelMs(l).toFixed(3):human(l[4]))+'</td></tr>');});
document.getElementById('g-costly').innerHTML+=c.join('')+'</table>';
// A node's label: its op, shortened to fit the box.
var kShort={MatMul:'MM',Gemm:'GE',Add:'+',Sub:'\u2212',Mul:'\u00d7',Div:'\u00f7',Softmax:'SM',Reshape:'RS',Transpose:'T',
  Gather:'GA',Attention:'AT',AttentionGrad:'AG',AdamW:'AW',SGD:'SG',Concat:'CC',Slice:'SL',Sqrt:'\u221a',Pow:'^',
  ReduceMean:'RM',ReduceSum:'RS',ReduceSumTo:'R\u03a3',Cast:'CA',Where:'WH',Expand:'EX',Unsqueeze:'US',Squeeze:'SQ',
  SoftmaxCrossEntropyLoss:'CE',SoftmaxCrossEntropyLossGrad:'CG',Neg:'\u2212',Sigmoid:'\u03c3',Tanh:'th',Exp:'ex'};
function shortOp(o){o=o.replace(/^fbl\./,'');return kShort[o]||o.slice(0,2);}
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
    r.appendChild(t);svg.appendChild(r);
    var lb=document.createElementNS(NS,'text');lb.setAttribute('x',x+kBox/2);lb.setAttribute('y',y+kBox/2+3);
    lb.setAttribute('text-anchor','middle');lb.setAttribute('font-size','8');lb.setAttribute('pointer-events','none');
    lb.setAttribute('fill',n.t==='eliminated'?'#555':'#fff');lb.textContent=shortOp(n.o);svg.appendChild(lb);}row++;});
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
// Tables: a click on a column sorts by it (numbers as numbers), a second click reverses; the
// search box above keeps the rows that contain its text.
function table(id,head,rows,right){var h=['<table><tr>'];head.forEach(function(c,j){h.push('<th data-col="'+j+'">'+c+'</th>');});h.push('</tr>');
  rows.forEach(function(r){h.push('<tr>');r.forEach(function(c,j){h.push(right.indexOf(j)>=0?'<td class="r" data-v="'+c+'">'+human(c)+'</td>':'<td>'+esc(c)+'</td>');});h.push('</tr>');});
  h.push('</table>');var el=document.getElementById(id);el.innerHTML=h.join('');
  var tb=el.querySelector('table');tb.querySelectorAll('th').forEach(function(th){th.onclick=function(){
    var j=+th.getAttribute('data-col'),up=th.classList.contains('sorted')&&!th.classList.contains('up');
    tb.querySelectorAll('th').forEach(function(o){o.classList.remove('sorted','up');});th.classList.add('sorted');if(up)th.classList.add('up');
    var trs=Array.prototype.slice.call(tb.querySelectorAll('tr')).slice(1);
    function key(tr){var td=tr.children[j],v=td.getAttribute('data-v');var x=v!==null?+v:parseFloat(td.textContent);return isNaN(x)||(v===null&&String(x)!==td.textContent)?td.textContent:x;}
    trs.sort(function(a,b){var x=key(a),y=key(b),r=typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y));return up?-r:r;});
    trs.forEach(function(tr){tb.appendChild(tr);});};});}
document.querySelectorAll('input.filter').forEach(function(f){f.oninput=function(){var q=f.value.toLowerCase();
  document.getElementById(f.getAttribute('data-for')).querySelectorAll('tr').forEach(function(tr,i){
    if(i>0)tr.style.display=tr.textContent.toLowerCase().indexOf(q)>=0?'':'none';});};});
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

}  // namespace fbl::report
