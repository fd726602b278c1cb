-- keelwave parity: GET /agent/runs/timeseries — runs and loop runs per time bucket (UTC).
-- Params: project_id, from, to, bucket_seconds (e.g. 60, 3600, 86400).
SELECT
    toDateTime(intDiv(toUInt32(started_at), {bucket_seconds:UInt32}) * {bucket_seconds:UInt32}, 'UTC') AS bucket,
    count() AS runs,
    sum(loop_detected) AS loop_runs
FROM runs FINAL
WHERE project_id = {project_id:String}
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY bucket
ORDER BY bucket
