"""Headless Chromium flags and the page measurement, shared by bench.bench_viewer and test_web."""

#: Headless Chromium flags that work in containers without a display or network (cpu-notes).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: What the page did with the frames it received: how many it drew, and for each frame how
#: long until the page showed it or a newer one (its lag, ms).
DRAWN = """() => {
    const v = window.rtplanViewer;
    const draws = v.drawLog, lags = [];
    let i = 0;
    for (const m of v.frames) {
        while (i < draws.length && (draws[i][1] < m.receivedAt || draws[i][0] < m.frame)) i++;
        lags.push(i < draws.length ? draws[i][1] - m.receivedAt : Infinity);
    }
    lags.sort((a, b) => a - b);
    const drawnFrames = new Set(draws.map(d => d[0]));
    const arrivals = v.frames.map(m => m.receivedAt);
    const span = (arrivals[arrivals.length - 1] - arrivals[0]) / 1000;
    return { received: v.frames.length,
             drawn: v.frames.filter(m => drawnFrames.has(m.frame)).length,
             last: v.frames[v.frames.length - 1].frame, lastDrawn: v.frame,
             seconds: span, receivedPerS: (v.frames.length - 1) / span,
             drawnPerS: (v.frames.filter(m => drawnFrames.has(m.frame)).length - 1) / span,
             lagP50: lags[Math.floor(lags.length / 2)], lagMax: lags[lags.length - 1],
             drawMs: v.drawMs };
}"""
