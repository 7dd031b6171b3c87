/* perflake web: the charts of every page, drawn with the vendored Apache ECharts
 * (static/vendor/echarts.min.js). Each page puts its data in a
 * <script type="application/json" id="chart-data"> block; nothing is fetched. A chart
 * marks its element data-ready="1" when drawn (the browser tests wait for it). */
(function () {
  'use strict';
  const COLORS = { provisional: '#b7791f', confirmed: '#c4302b', acknowledged: '#2f5fd0', closed: '#667085',
                   cleared: '#98a2b3', faster: '#1f8a4c', slower: '#c4302b', same: '#98a2b3', ambiguous: '#b7791f' };
  const charts = {};
  window.perflakeCharts = charts;

  function pageData() {
    const el = document.getElementById('chart-data');
    return el ? JSON.parse(el.textContent) : null;
  }

  function ns(v, digits) {
    if (v === null || v === undefined || isNaN(v)) return '-';
    const a = Math.abs(v), d = typeof digits === 'number' ? digits : 3;
    if (a >= 1e9) return (v / 1e9).toPrecision(d) + ' s';
    if (a >= 1e6) return (v / 1e6).toPrecision(d) + ' ms';
    if (a >= 1e3) return (v / 1e3).toPrecision(d) + ' us';
    return v.toPrecision(d) + ' ns';
  }

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  function init(id) {
    const el = document.getElementById(id);
    if (!el) return null;
    const chart = echarts.init(el, null, { renderer: 'canvas' });
    charts[id] = chart;
    window.addEventListener('resize', () => chart.resize());
    return chart;
  }

  function ready(id, attrs) {
    const el = document.getElementById(id);
    if (!el) return;
    Object.entries(attrs || {}).forEach(([k, v]) => el.setAttribute('data-' + k, String(v)));
    el.setAttribute('data-ready', '1');
  }

  /* Explorer: a 30-point polyline per row. Plain SVG: fifty chart instances per page
   * would cost more than the page itself, and a sparkline needs no axes or tooltips. */
  function sparklines() {
    document.querySelectorAll('td.spark[data-spark]').forEach(td => {
      const pts = JSON.parse(td.getAttribute('data-spark')).map(p => p[1]).filter(v => v !== null);
      if (pts.length < 2) return;
      const w = 120, h = 26, lo = Math.min(...pts), hi = Math.max(...pts), span = hi - lo || 1;
      const xy = pts.map((v, i) => `${(i * (w - 2) / (pts.length - 1) + 1).toFixed(1)},${(h - 2 - (v - lo) / span * (h - 4)).toFixed(1)}`);
      td.innerHTML = `<svg width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" aria-hidden="true">` +
        `<polyline fill="none" stroke="#2f5fd0" stroke-width="1.2" points="${xy.join(' ')}"/></svg>`;
    });
  }

  /* Series: history with bands, change points, software changes, efficiency and energy. */
  function history(data) {
    const chart = init('history-chart');
    if (!chart) return;
    const pts = data.points, seen = {};
    const cats = pts.map(p => { seen[p.dt] = (seen[p.dt] || 0) + 1; return seen[p.dt] > 1 ? `${p.dt} #${seen[p.dt]}` : p.dt; });
    const firstAt = dt => cats.indexOf(dt);
    const prov = {};
    data.provenance.forEach(p => { const i = pts.findIndex(q => q.run_id === p.run_id); if (i >= 0) prov[cats[i]] = p.diff; });
    const steps = {};
    data.changes.forEach(c => { const i = firstAt(c.change_dt); if (i >= 0) (steps[cats[i]] = steps[cats[i]] || []).push(c); });
    const energy = pts.some(p => p.energy_per_call_j !== null);
    const efficiency = pts.some(p => p.pct_of_peak !== null);
    // The history on top; % of roofline and energy per call below it, where measured.
    const below = [efficiency && ['% of roofline', '% roof', p => p.pct_of_peak, '#1f8a4c'],
                   energy && ['energy / call', 'J / call', p => p.energy_per_call_j, '#b7791f']].filter(Boolean);
    const grids = [[{ top: 36, bottom: 60 }], [{ top: 36, height: '58%' }, { top: '74%', height: '12%' }],
                   [{ top: 36, height: '48%' }, { top: '63%', height: '11%' }, { top: '80%', height: '9%' }]][below.length];
    const axes = grids.map((g, i) => ({ type: 'category', data: cats, gridIndex: i, axisLabel: { show: i === grids.length - 1 } }));
    const band = (name, lo, hi, stack, color) => [
      { name: name + ' low', type: 'line', data: pts.map(lo), stack, symbol: 'none', lineStyle: { opacity: 0 }, tooltip: { show: false } },
      { name, type: 'line', data: pts.map(p => (hi(p) !== null && lo(p) !== null) ? hi(p) - lo(p) : null), stack,
        symbol: 'none', lineStyle: { opacity: 0 }, areaStyle: { color, opacity: 1 } }];
    const marks = data.changes.map(c => {
      const i = firstAt(c.change_dt);
      return i < 0 ? null : { coord: [cats[i], pts[i].median_ns], value: c.status, name: c.regression_id,
                              itemStyle: { color: COLORS[c.status] || '#333' } };
    }).filter(Boolean);
    const series = [
      ...band('p10-p90', p => p.p10_ns, p => p.p90_ns, 'p', '#dfe7fa'),
      ...band('95 % CI', p => p.median_ci_low_ns, p => p.median_ci_high_ns, 'ci', '#b9c8f0'),
      { name: 'median', type: 'line', data: pts.map(p => p.median_ns), symbolSize: 4, color: '#2f5fd0',
        markPoint: { symbol: 'pin', symbolSize: 44, label: { fontSize: 9, formatter: m => m.value.slice(0, 4) }, data: marks },
        markLine: { symbol: 'none', silent: false, lineStyle: { type: 'dashed', color: '#8a6d3b' }, label: { show: false },
                    data: Object.keys(prov).map(c => ({ xAxis: c, name: prov[c].join('; ') })) } },
      ...below.map(([name, , value, color], i) => ({ name, type: 'line', xAxisIndex: i + 1, yAxisIndex: i + 1,
                                                    data: pts.map(value), symbolSize: 3, color }))];
    series.forEach(s => { if (s.areaStyle) s.color = s.areaStyle.color; });
    chart.setOption({
      animation: false, grid: grids.map(g => ({ ...g, left: 70, right: 30 })), xAxis: axes,
      yAxis: [{ type: 'value', scale: true, gridIndex: 0, name: 'time / call', axisLabel: { formatter: v => ns(v) },
                boundaryGap: ['5%', '20%'] },
              ...below.map(([, unit], i) => ({ type: 'value', scale: true, gridIndex: i + 1, name: unit, splitNumber: 2 }))],
      dataZoom: [{ type: 'inside', xAxisIndex: axes.map((_, i) => i) },
                 { type: 'slider', xAxisIndex: axes.map((_, i) => i), bottom: 4, height: 18 }],
      axisPointer: { link: [{ xAxisIndex: 'all' }] },
      tooltip: { trigger: 'axis', formatter: items => {
        const i = items[0].dataIndex, p = pts[i], c = cats[i];
        let html = `<b>${escapeHtml(p.dt)}</b> ${escapeHtml(p.run_id)}<br>median ${ns(p.median_ns)} ` +
          `[${ns(p.median_ci_low_ns)}, ${ns(p.median_ci_high_ns)}]<br>p10-p90 ${ns(p.p10_ns)} - ${ns(p.p90_ns)}`;
        if (p.pct_of_peak !== null) html += `<br>${p.pct_of_peak.toFixed(1)} % of roofline`;
        if (p.energy_per_call_j !== null) html += `<br>${p.energy_per_call_j.toPrecision(3)} J / call`;
        if (p.stable === false) html += '<br><i>unstable</i>';
        (steps[c] || []).forEach(s => { html += `<br><b>change ${escapeHtml(s.regression_id)}</b>: ${escapeHtml(s.metric)} ` +
          `${s.change_pct.toFixed(1)} % ${escapeHtml(s.status)}${s.cause ? ' (' + escapeHtml(s.cause) + ')' : ''}`; });
        if (prov[c]) html += '<br><b>software changed</b>: ' + prov[c].map(escapeHtml).join('<br>');
        return html; } },
      legend: { top: 4, right: 10, data: ['median', '95 % CI', 'p10-p90'] },
      series });
    chart.on('click', e => { if (e.componentType === 'markPoint') location.hash = 'changes'; });
    ready('history-chart', { 'change-points': marks.length, 'provenance-changes': Object.keys(prov).length, points: pts.length });
  }

  function histogram(data) {
    const chart = init('samples-chart');
    if (!chart || !data.samples.length) { ready('samples-chart', { samples: 0 }); return; }
    // Bins span the kept samples; slower flagged samples share one last bin, so that a
    // far outlier does not squeeze the distribution into one bar.
    const xs = data.samples.map(s => s[0]), kept = data.samples.filter(s => !s[1] && !s[2]).map(s => s[0]);
    const lo = Math.min(...xs), hi = Math.max(...(kept.length ? kept : xs)), over = Math.max(...xs) > hi;
    const bins = 40, width = (hi - lo) / bins || 1, n = bins + (over ? 1 : 0);
    const counts = { kept: new Array(n).fill(0), throttled: new Array(n).fill(0), outlier: new Array(n).fill(0) };
    data.samples.forEach(([v, throttled, outlier]) => {
      const b = v > hi ? n - 1 : Math.min(bins - 1, Math.floor((v - lo) / width));
      counts[throttled ? 'throttled' : outlier ? 'outlier' : 'kept'][b] += 1;
    });
    const cats = counts.kept.map((_, i) => i < bins ? ns(lo + (i + 0.5) * width, 4) : '> ' + ns(hi, 4));
    chart.setOption({
      animation: false, grid: { left: 50, right: 20, top: 30, bottom: 40 }, legend: { top: 0 },
      tooltip: { trigger: 'axis' }, xAxis: { type: 'category', data: cats }, yAxis: { type: 'value', name: 'samples' },
      series: ['kept', 'throttled', 'outlier'].map(k => ({ name: k, type: 'bar', stack: 's', data: counts[k],
        color: { kept: '#2f5fd0', throttled: '#c4302b', outlier: '#b7791f' }[k] })) });
    ready('samples-chart', { samples: xs.length });
  }

  function compare(data) {
    const chart = init('compare-chart');
    if (!chart) return;
    const cats = data.map(r => r.case);
    chart.setOption({
      animation: false, grid: { left: 60, right: 20, top: 20, bottom: 30 },
      tooltip: { trigger: 'item', formatter: p => { const r = data[p.dataIndex];
        return `${escapeHtml(r.case)}<br>B/A ${r.ratio.toFixed(4)} [${(r.lo ?? NaN).toFixed(4)}, ${(r.hi ?? NaN).toFixed(4)}]<br>${escapeHtml(r.verdict)}`; } },
      xAxis: { type: 'category', data: cats, axisLabel: { show: false } }, yAxis: { type: 'value', scale: true, name: 'B / A' },
      dataZoom: [{ type: 'inside' }],
      series: [
        { type: 'custom', data: data.map((r, i) => [i, r.lo, r.hi]), renderItem: (params, api) => {
            const a = api.coord([api.value(0), api.value(1)]), b = api.coord([api.value(0), api.value(2)]);
            return { type: 'line', shape: { x1: a[0], y1: a[1], x2: b[0], y2: b[1] }, style: { stroke: '#98a2b3', lineWidth: 1 } }; },
          tooltip: { show: false }, z: 1 },
        { type: 'scatter', symbolSize: 6, z: 2, data: data.map(r => ({ value: r.ratio, itemStyle: { color: COLORS[r.verdict] || '#333' } })),
          markLine: { symbol: 'none', silent: true, data: [{ yAxis: 1 }], lineStyle: { color: '#667085' } } }] });
    ready('compare-chart', { cases: data.length });
  }

  function roofline(data) {
    const chart = init('roofline-chart');
    if (chart && data.hw) {
      const xs = [0.01, 0.1, 1, 10, 100, 1000, 10000], bw = data.hw.memory_bandwidth_gbps || 0;
      const byDtype = {};
      data.points.forEach(p => (byDtype[p.dtype] = byDtype[p.dtype] || []).push(p));
      // One colour per dtype, the same on every GPU and kind, shared by the dtype's roof and its points.
      const spare = ['#0f766e', '#a21caf', '#4d7c0f', '#9a3412'], known = { fp32: '#2f5fd0', tf32: '#0891b2',
        bf16: '#d97706', fp16: '#16a34a', fp8: '#c4302b', fp64: '#6b21a8', int8: '#475569' };
      const colour = dtype => known[dtype] || (known[dtype] = spare[Object.keys(known).length % spare.length]);
      const roofs = Object.entries(data.hw.peak_tflops).filter(([d]) => byDtype[d]).map(([dtype, peak]) => {
        const knee = peak * 1000 / bw, line = xs.filter(x => x < knee).concat([knee], xs.filter(x => x > knee));
        return { name: `roof ${dtype}`, type: 'line', symbol: 'none', silent: true, color: colour(dtype),
                 lineStyle: { type: 'dashed', width: 1 }, data: line.map(x => [x, Math.min(peak, x * bw / 1000)]) }; });
      const points = Object.entries(byDtype).map(([dtype, pts]) => ({ name: dtype, type: 'scatter', symbolSize: 7,
        color: colour(dtype), data: pts.map(p => ({ value: [p.intensity, p.tflops], p })) }));
      chart.setOption({
        animation: false, grid: { left: 70, right: 30, top: 40, bottom: 50 }, legend: { top: 5 },
        tooltip: { trigger: 'item', formatter: e => { const p = e.data && e.data.p; if (!p) return e.seriesName;
          return `<b>${escapeHtml(p.kernel)}</b> ${escapeHtml(p.dtype)} ${escapeHtml(p.shape)}<br>${p.tflops.toPrecision(3)} TFLOP/s at ` +
            `${p.intensity.toPrecision(3)} flop/byte<br>median ${ns(p.median_ns)}` +
            (p.pct_of_peak !== null ? `<br>${p.pct_of_peak.toFixed(1)} % of roofline` : ''); } },
        xAxis: { type: 'log', name: 'flop / byte', nameLocation: 'middle', nameGap: 28 },
        yAxis: { type: 'log', name: 'TFLOP/s' }, dataZoom: [{ type: 'inside', xAxisIndex: 0 }, { type: 'inside', yAxisIndex: 0 }],
        series: roofs.concat(points) });
      const base = document.getElementById('roofline-chart').getAttribute('data-base') || '';
      chart.on('click', e => { if (e.data && e.data.p) location.href = `${base}/series/${encodeURIComponent(e.data.p.series_key)}`; });
      ready('roofline-chart', { points: data.points.length });
    }
    const proj = init('projection-chart');
    if (proj && data.projections.length) {
      const vals = data.projections.flatMap(p => [p.projected_ns, p.measured_ns]);
      const lo = Math.min(...vals) / 1.5, hi = Math.max(...vals) * 1.5;
      proj.setOption({
        animation: false, grid: { left: 70, right: 30, top: 20, bottom: 50 },
        tooltip: { trigger: 'item', formatter: e => { const p = e.data.p; if (!p) return '';
          return `<b>${escapeHtml(p.kernel)}</b> ${escapeHtml(p.dtype)} ${escapeHtml(p.shape || '')}<br>projected ${ns(p.projected_ns)}` +
            `<br>measured ${ns(p.measured_ns)}<br>error ${p.error_pct === null ? '-' : p.error_pct.toFixed(1) + ' %'}`; } },
        xAxis: { type: 'log', name: 'measured', nameLocation: 'middle', nameGap: 28, min: lo, max: hi, axisLabel: { formatter: v => ns(v) } },
        yAxis: { type: 'log', name: 'projected', min: lo, max: hi, axisLabel: { formatter: v => ns(v) } },
        series: [{ type: 'scatter', symbolSize: 6, data: data.projections.map(p => ({ value: [p.measured_ns, p.projected_ns], p })) },
                 { type: 'line', symbol: 'none', silent: true, data: [[lo, lo], [hi, hi]], lineStyle: { type: 'dashed', color: '#667085' } }] });
      ready('projection-chart', { projections: data.projections.length });
    }
  }

  function main() {
    sparklines();
    const data = pageData();
    if (!data || typeof echarts === 'undefined') return;
    if (document.getElementById('history-chart')) { history(data); histogram(data); }
    if (document.getElementById('compare-chart')) compare(data);
    if (document.getElementById('roofline-chart') || document.getElementById('projection-chart')) roofline(data);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main); else main();
})();
