-- keelwave parity: GET /agent/runs/{id}/loops — every raw fingerprint seen twice or more in the
-- run: base64 digest, hits, step_indices ascending, tool_name; by hits desc; empty when none.
-- Params: project_id, run_id.
SELECT
    base64Encode(raw_fp) AS fingerprint,
    count() AS hits,
    arraySort(groupArray(step_index)) AS step_indices,
    any(tool_name) AS tool_name
FROM steps FINAL
WHERE project_id = {project_id:String} AND run_id = {run_id:String} AND has_raw_fp = 1
GROUP BY raw_fp
HAVING hits >= 2
ORDER BY hits DESC, step_indices[1]
