# Issue 4's rule, in one place: a format meets when its held-out mean relative error is <= 5 % and its p95 <= 12 %.
# Reads aijp_refit's summary (the placeholder's lines: format, matrices, mean%, median%, p95%; then the regret line).
#   awk -f bench/refit_meet.awk                      the number of formats that meet
#   awk -f bench/refit_meet.awk -v report=of         "M of N formats meet mean <= 5 % and p95 <= 12 %"
#   awk -f bench/refit_meet.awk -v report=line -v name=NAME
#                                                    "NAME meet M  regret R (W within 5 %) | format mean/p95 ..."
BEGIN { mean_max = 5; p95_max = 12 }
function meets(mean, p95) { return mean <= mean_max && p95 <= p95_max }
$1 == "placeholder" && NF == 6 && $3 ~ /^[0-9]+$/ { n++; meet += meets($4, $6); line = line sprintf(" %s %s/%s", $2, $4, $6) }
$1 == "placeholder" && NF == 6 && $4 ~ /%$/ && regret == "" { regret = $3 " (" $4 " within 5 %)" }
END {
  if (report == "of") printf "%d of %d formats meet mean <= %g %% and p95 <= %g %%\n", meet, n, mean_max, p95_max
  else if (report == "line") printf "%-40s meet %2d  regret %s |%s\n", name, meet, regret, line
  else print meet + 0
}
