-- SPDX-License-Identifier: MIT
-- wrk.lua - lets wrk talk to an explicit proxy, and prints a summary the bench parses.
--
-- wrk cannot use a proxy itself: point it at http://PROXY:PORT and set
-- BENCH_TARGET=http://HOST:PORT/PATH; every request then carries that
-- absolute-form target and a matching Host header, which is what a client
-- sends to a forward proxy. Without BENCH_TARGET requests go out as wrk
-- builds them (origin-form, to the server in wrk's URL).
--
-- done() prints one line:
--   WRKRESULT requests=N duration_us=N rps=R p50_us=N p90_us=N p99_us=N
--             max_us=N connect=N read=N write=N status=N timeout=N
-- (the last five are wrk's error counters; status counts answers that were
-- not 2xx/3xx).

local target = os.getenv("BENCH_TARGET")
if target and target ~= "" then
	local authority = target:match("^http://([^/]+)")
	if not authority then
		error("BENCH_TARGET must be http://HOST[:PORT]/PATH, not " .. target)
	end
	wrk.path = target
	wrk.headers["Host"] = authority
end

function done(summary, latency, requests)
	local e = summary.errors
	local secs = summary.duration / 1e6
	io.write(string.format(
		"WRKRESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d " ..
		"max_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
		summary.requests, summary.duration, summary.requests / secs,
		latency:percentile(50), latency:percentile(90), latency:percentile(99),
		latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
