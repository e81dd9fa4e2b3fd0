set -u
pip install --no-deps --no-index --target /tmp/sdk .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/sdk PYTHONUNBUFFERED=1 KERNELCRAFT_CACHE=/tmp/kc-cache
python dbg5.py > $OUT/ln-tail.log 2>&1; cat $OUT/ln-tail.log
for spec in "level1/tanh 2" "level1/kl_div_loss 2" "level1/attention 2" "level1/sdpa_causal_fp16 2" "level2/bmm_scale_softmax 1"; do
  set -- $spec
  timeout 75 python -m kernelcraft.cli run $1 --rounds $2 --ideas 3 --backend triton --no-compile-baseline --timing-budget 1 --store /tmp/runs.db --out /tmp/kout --json > /tmp/run.json 2>>/tmp/dbg-stderr.txt
  echo "== $1 rc $?"
done
python - <<'PY' > $OUT/dbg-incorrect.txt
import json, sqlite3
db = sqlite3.connect("/tmp/runs.db")
rows = db.execute("select r.problem, c.key, i.text, res.status, res.result from results res join candidates c on c.id=res.candidate_id join runs r on r.id=c.run_id left join ideas i on i.id=c.idea_id").fetchall()
for prob, key, idea, status, result in rows:
    d = json.loads(result)
    print(prob, key, status, d.get("max_rel_error"), (idea or "")[:200])
    if status != "ok":
        print("  reasons:", d.get("reasons"), "msg:", (d.get("message") or "")[:700])
        print("  trials:", d.get("trial_errors"))
PY
cut -c1-450 $OUT/dbg-incorrect.txt | grep -v "^  trials" | head -70
