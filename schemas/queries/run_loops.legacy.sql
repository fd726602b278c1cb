-- run_loops for servers without base64Encode (ClickHouse < 19.x, e.g. Debian's 18.16): the digest
-- comes back as hex in `fingerprint_hex`, which `eddy query` re-encodes as base64 `fingerprint`.
SELECT
    hex(raw_fp) AS fingerprint_hex,
    count() AS hits,
    arraySort(groupArray(step_index)) AS step_indices,
    any(tool_name) AS tool_name
FROM steps FINAL
WHERE project_id = {project_id:String} AND run_id = {run_id:String} AND has_raw_fp = 1
GROUP BY raw_fp
HAVING hits >= 2
ORDER BY hits DESC, step_indices[1]
