"""Token serving: the generation suite's decoders driven by MLPerf's LoadGen in its token mode
(SingleStream, Server, Offline; TTFT and TPOT measured, bounded, judged by LoadGen)."""
