#!/usr/bin/env bash
# MatMul: larger per-work-item tiles without the register cap; ptxas info and SASS of the inner loop
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab7.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
mkprof() { python3 - "$1" "$2" <<'PY'
import json,sys
p=json.load(open('profiles/nvidia-h200.json'))
p['opencl']['build_options']=sys.argv[2]
json.dump(p,open(sys.argv[1],'w'),indent=1)
PY
}
mkprof $R/cap255.json "-cl-nv-maxrregcount=255 -DFBL_NO_REQD_WORK_GROUP_SIZE"
mkprof $R/cap168.json "-cl-nv-maxrregcount=168 -DFBL_NO_REQD_WORK_GROUP_SIZE"
mkprof $R/reqd.json ""
mm() { # label profile args
  local l=$1 prof=$2; shift 2
  mkdir -p $R/dump-$l
  FBL_CL_DUMP_DIR=$R/dump-$l FBL_CL_OPTIONS=-cl-nv-verbose FBL_CL_BUILD_LOG=1 timeout 60 $B/fbl-bench matmul --device ${dev:-0} --profile $prof --runs 20 --strategy fblayout "$@" > $R/mm-$l.txt 2> $R/mm-$l.log
  printf "%-26s" $l; awk '/^  forward  /{f=$2} /backward dA/{a=$3} /backward dB/{b=$3} /forward\+backward/{t=$2} END{printf " fwd %s dA %s dB %s total %s  ", f,a,b,t}' $R/mm-$l.txt
  grep -hoE "Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)" $R/mm-$l.log | sort | uniq -c | tr '\n' ' '; echo
}
mm base $P
mm b128x256x8p3 $R/cap255.json --tile 128x256x8/8x16:3
mm b256x128x8p3 $R/cap255.json --tile 256x128x8/16x8:3
mm b128x256x8p2 $R/cap255.json --tile 128x256x8/8x16:2
mm b256x128x8p2 $R/cap255.json --tile 256x128x8/16x8:2
mm b128x128x8r816p3 $R/cap255.json --tile 128x128x8/8x16:3
mm b128x128x16r816p3 $R/cap255.json --tile 128x128x16/8x16:3
mm b128x256x8p3c168 $R/cap168.json --tile 128x256x8/8x16:3
mm b128x256x8p3reqd $R/reqd.json --tile 128x256x8/8x16:3
mm b128x128x8p3c255 $R/cap255.json --tile 128x128x8/8x8:3
mm b64x256x8p3 $R/cap255.json --tile 64x256x8/8x16:3
mm t128x128x32p1 $P --tile 128x128x32/8x8:1
mm t128x128x16p3c255 $R/cap255.json --tile 128x128x16/8x8:3
timeout 60 python3 bench/torch_matmul_reference.py > $R/cublas.json 2>&1; grep -A1 -E '"(forward|dA|dB)"' $R/cublas.json | grep min_ms | tr '\n' ' '; echo
# SASS of the base and one big tile through the ptxas / cuobjdump that ship with triton
TB=$(python3 -c "import triton,os;print(os.path.dirname(triton.__file__)+'/backends/nvidia/bin')" 2>/dev/null)
ls $TB > $R/triton-bin.txt 2>&1
for l in base b128x256x8p3; do
  for f in $R/dump-$l/*.bin; do
    [ -f "$f" ] || continue
    n=$(basename $f .bin)
    cap=128; [ $l = base ] || cap=255
    $TB/ptxas -arch=sm_90 -v --maxrregcount=$cap "$f" -o $R/$l-$n.cubin > $R/$l-$n.ptxas.txt 2>&1 &&
      $TB/cuobjdump -sass $R/$l-$n.cubin > $R/$l-$n.sass 2>&1
  done
done
ls -la $R | head -60
# attention with head dims in chunks: 2-layer Gemma2 (head_dim 256) and Qwen2.5 (128), per-kernel device times
for m in gemma2-2b qwen2.5-1.5b llama3.2-1b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m.onnx > /dev/null &&
    timeout 120 $B/fbl-bench step /tmp/zoo/$m.onnx --profile $P --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step2-$m.json 2>&1 | grep -v "macro redefined" | tail -3
  python3 -c "
import json,sys
r=json.load(open('$R/step2-$m.json'))['results'][0]
print('$m', {k:round(v*1e3,3) for k,v in r['device_s_by_kernel'].items() if 'attention' in k or 'matmul' in k or 'splitk' in k})"
done
# split-K capped lower: the same 2-layer Gemma2 step (matmul + splitk device time)
for ms in 8 4; do
  python3 - $R/split$ms.json $ms <<'PY'
import json,sys
p=json.load(open('profiles/nvidia-h200.json')); p['matmul']['max_split']=int(sys.argv[2]); json.dump(p,open(sys.argv[1],'w'),indent=1)
PY
  timeout 120 $B/fbl-bench step /tmp/zoo/gemma2-2b.onnx --profile $R/split$ms.json --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step2-gemma-split$ms.json 2>&1 | grep -v "macro redefined" | tail -2
  python3 -c "
import json
r=json.load(open('$R/step2-gemma-split$ms.json'))['results'][0]
k=r['device_s_by_kernel']; print('max_split $ms', 'device ms', round(r['device_s']*1e3,2), {x:round(v*1e3,3) for x,v in k.items() if 'matmul' in x or 'splitk' in x})"
done
