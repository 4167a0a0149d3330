#!/usr/bin/env bash
# The MLP's 16 MB narrow products and three keys, each part on the binaries named below:
# matmul.narrow.max_slice_texels (more slices, past the fill target, while a slice walks more
# than that), prefetch_min_texels (a slice loads its next round before the current round's mads)
# and narrow_in_group_min_bytes (from a wide operand that large, a group holds all of the narrow
# side's blocks). The keys exist only with narrow-keys.patch (here) applied to commit 689b438;
# none was built (README.md). PART=sweeps|sweeps2|steps, one call each:
#   sweeps:  fbl-bench matmul --sweep --only "lora mlp" (the MLP's LoRA products, 16 MB) at rank 8
#            (buffer, image) and 16 (buffer), on the binaries before narrow_in_group_min_bytes;
#            its rows switch the first two keys per product;
#   sweeps2: fbl-bench matmul --sweep --only lora (4 MB and 16 MB products) at rank 8 and 16
#            (buffer) and 8 (image); its rows switch each key per product;
#   steps:   2-layer Llama-3.2-1B, Qwen2.5-1.5B, Gemma2-2B at rank 8: the profile as it was (every
#            key 0), narrow_in_group_min_bytes 16 MiB, and 1 (every product); Llama-3.2-1B at rank
#            16: 0 and 16 MiB.
# Narrow products by kind: ../h200-2026-12-03-s31/narrow_share.py. Everything lands in
# $OUT/lab36-$PART.tar.gz (one file: the device returns a limited count).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
R=/tmp/lab36-$PART; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab36-$PART.tar.gz -C $R .' EXIT
variant() {  # name narrow_in_group_min_bytes
  python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
p['matmul']['narrow']['narrow_in_group_min_bytes'] = $2
json.dump(p, open('/tmp/h200-$1.json', 'w'), indent=1)"
}
variant off 0; variant nig16m 16777216; variant nig1 1
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
if [ $PART = sweeps ]; then
  for rs in 8-buffer 8-image 16-buffer; do
    r=${rs%-*}; st=${rs#*-}
    timeout 170 $B/fbl-bench matmul --sweep --only "lora mlp" --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile /tmp/h200-off.json --sweep-json $R/sweep-r$r-$st.json > $R/sweep-r$r-$st.txt 2>&1
    echo "rank $r $st"; grep -E "^lora|stream floor" $R/sweep-r$r-$st.txt | cut -c1-150
    grep -A6 "  items" $R/sweep-r$r-$st.txt | grep -v "^--" | cut -c1-150
    date +%T
  done
  exit 0
fi
if [ $PART = sweeps2 ]; then
  for rs in 8-buffer 16-buffer 8-image; do
    r=${rs%-*}; st=${rs#*-}
    timeout 190 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile /tmp/h200-off.json --sweep-json $R/sweep-r$r-$st.json > $R/sweep-r$r-$st.txt 2>&1
    echo "rank $r $st"; grep -E "^lora|(profile)" $R/sweep-r$r-$st.txt | cut -c1-150
    date +%T
  done
  exit 0
fi
for mr in llama3.2-1b:8 qwen2.5-1.5b:8 gemma2-2b:8 llama3.2-1b:16; do
  m=${mr%:*}; r=${mr#*:}; name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  vs="off nig16m nig1"; [ $r = 16 ] && vs="off nig16m"
  for v in $vs; do
    $B/fblc compile /tmp/zoo/$name.onnx --profile /tmp/h200-$v.json -o /tmp/zoo/$name-$v.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$name-$v.fbp > $R/$name-$v-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$name.onnx --profile /tmp/h200-$v.json --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$name-$v.json > $R/$name-$v.txt 2>&1
    echo "$name, $v"; sed -n 3p $R/$name-$v.txt
    python3 -c "import json; r = json.load(open('$R/$name-$v.json'))['results'][0]; print('loss', r['first_loss'], r['last_loss'])"
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$name-$v-explain.txt $R/$name-$v.json 2>&1 | tail -4
  done
  date +%T
done
