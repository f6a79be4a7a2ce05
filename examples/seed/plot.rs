//! The plot: small multiples, one column per unmap mode and one panel per policy, each on
//! its own axes so that no policy hides another. A panel shows the depot length (blue,
//! left axis: per bucket of time the most and the fewest magazines holding items seen,
//! flush-timer drains and the highs `Stats::depot_peak` recorded between samples
//! included, so that the title's peaks are values of the dark line) and the slow-path
//! calls since the end of the warm-up (red, right axis), the idle phase shaded and the end
//! of the warm-up marked.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::scenario::Mode;
use crate::sim::{Outcome, Sample};

const PANEL_WIDTH: u32 = 560;
const PANEL_HEIGHT: u32 = 250;
const TITLE_HEIGHT: u32 = 88;
const DEPOT: RGBColor = RGBColor(31, 90, 180);
const SLOW: RGBColor = RGBColor(200, 40, 40);
const DEPOT_LOW: RGBColor = RGBColor(120, 170, 230);
const DEPOT_BAND: RGBColor = RGBColor(205, 222, 245);
const IDLE: RGBColor = RGBColor(225, 225, 225);
/// Buckets of time a panel's depot band has across its x axis.
const BUCKETS: f64 = 400.0;

/// Draws every mode's panels into an SVG file.
pub fn draw(by_mode: &[(Mode, &[Outcome])], path: &Path) -> Result<(), String> {
    let columns = by_mode.len().max(1);
    let rows = by_mode
        .iter()
        .map(|(_, o)| o.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let size = (
        PANEL_WIDTH * columns as u32,
        TITLE_HEIGHT + PANEL_HEIGHT * rows as u32,
    );
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    draw_title(&title, by_mode).map_err(|e| e.to_string())?;
    let cells = body.split_evenly((rows, columns));
    for (column, (mode, outcomes)) in by_mode.iter().enumerate() {
        for (row, outcome) in outcomes.iter().enumerate() {
            draw_panel(*mode, outcome, &cells[row * columns + column])
                .map_err(|e| e.to_string())?;
        }
    }
    root.present().map_err(|e| e.to_string())
}

fn draw_title(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    by_mode: &[(Mode, &[Outcome])],
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let style = TextStyle::from(("sans-serif", 17).into_font());
    area.draw_text(
        "Seed scenario, one column per unmap mode, one panel per policy (each on its own axes).",
        &style,
        (10, 6),
    )?;
    let small = TextStyle::from(("sans-serif", 13).into_font());
    area.draw_text(
        "Blue, left axis: magazines holding IOVAs in the depot per 1/400 of the time axis; dark: the most, light: the fewest seen (samples every --sample-ms, flush-timer drains, highs between samples).",
        &small,
        (10, 28),
    )?;
    area.draw_text(
        "Red, right axis: cumulative slow-path calls (allocs + frees) from the end of the warm-up (thin black line). Grey: idle phase. Title: depot peaks = the dark line's highest, load / run.",
        &small,
        (10, 46),
    )?;
    let columns = by_mode.len().max(1) as i32;
    let width = area.dim_in_pixel().0 as i32 / columns;
    for (i, (mode, _)) in by_mode.iter().enumerate() {
        area.draw_text(
            &format!("mode: {mode}"),
            &TextStyle::from(("sans-serif", 16).into_font().style(FontStyle::Bold)),
            (i as i32 * width + 10, 66),
        )?;
    }
    Ok(())
}

fn draw_panel(
    mode: Mode,
    outcome: &Outcome,
    area: &DrawingArea<SVGBackend<'_>, Shift>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let seconds = |s: &Sample| s.ns as f64 / 1e9;
    let slow = |s: &Sample| (s.slow.allocs + s.slow.frees) as f64;
    let samples = &outcome.samples;
    let end = samples.last().map_or(1e-3, seconds).max(1e-3);
    let depot_top = samples
        .iter()
        .map(|s| s.depot_full_max as f64)
        .fold(1.0, f64::max)
        * 1.1;
    // Slow-path calls count from the end of the warm-up, as the table's rates do: the
    // initial fill would otherwise dwarf them.
    let warm_ns = outcome.warmup_end_ns;
    let base = samples.iter().find(|s| s.ns >= warm_ns).map_or(0.0, slow);
    let counted: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.ns >= warm_ns)
        .map(|s| (seconds(s), slow(s) - base))
        .collect();
    // A different headroom than the depot axis: the two lines never end on one pixel.
    let slow_top = counted.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25;
    let load_end = outcome.load_end_ns as f64 / 1e9;

    let caption = format!(
        "{} [{mode}]: {:.4} slow allocs/1k I/O, depot peak {} (load) / {} (run)",
        outcome.contender.label(),
        outcome.allocs_per_k(),
        outcome.depot_peak,
        outcome.depot_peak_run,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 13))
        .margin(6)
        .x_label_area_size(28)
        .y_label_area_size(44)
        .right_y_label_area_size(48)
        .build_cartesian_2d(0.0..end, 0.0..depot_top)?
        .set_secondary_coord(0.0..end, 0.0..slow_top);
    chart
        .configure_mesh()
        .x_desc("simulated s")
        .y_desc("magazines with IOVAs")
        .y_label_formatter(&|v| compact(*v))
        .label_style(("sans-serif", 11))
        .axis_desc_style(("sans-serif", 11))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("slow-path calls after warm-up")
        .y_label_formatter(&|v| compact(*v))
        .label_style(("sans-serif", 11))
        .axis_desc_style(("sans-serif", 11))
        .draw()?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [(load_end, 0.0), (end, depot_top)],
        IDLE.filled(),
    )))?;
    // The end of the warm-up: the table's rates count from here.
    let warm = warm_ns as f64 / 1e9;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(warm, 0.0), (warm, depot_top)],
        BLACK.mix(0.4).stroke_width(1),
    )))?;
    // The depot as a band: per bucket of time, the fewest full magazines seen (light) and
    // the most (dark), right before and after flush-timer drains included. Buckets keep the lines readable
    // over a minute of 10 ms samples.
    let (low, high) = buckets(samples, end / BUCKETS);
    chart.draw_series(
        low.iter()
            .zip(&high)
            .map(|(l, h)| Rectangle::new([(l.0, l.1), (h.2, h.1)], DEPOT_BAND.filled())),
    )?;
    // Red before the depot's lines, so that those stay visible where the two meet.
    chart.draw_secondary_series(LineSeries::new(counted, SLOW.stroke_width(2)))?;
    chart.draw_series(LineSeries::new(
        high.iter().map(|b| (b.0, b.1)),
        DEPOT.stroke_width(1),
    ))?;
    chart.draw_series(LineSeries::new(
        low.iter().map(|b| (b.0, b.1)),
        DEPOT_LOW.stroke_width(1),
    ))?;
    Ok(())
}

/// Per bucket of `width` seconds (at least one sample each): (start, fewest magazines
/// holding items seen, end) and (start, the most seen, end).
type Bucket = (f64, f64, f64);
fn buckets(samples: &[Sample], width: f64) -> (Vec<Bucket>, Vec<Bucket>) {
    let (mut low, mut high): (Vec<Bucket>, Vec<Bucket>) = (Vec::new(), Vec::new());
    for s in samples {
        let t = s.ns as f64 / 1e9;
        let start = (t / width).floor() * width;
        match (low.last_mut(), high.last_mut()) {
            (Some(l), Some(h)) if l.0 == start => {
                l.1 = l.1.min(s.depot_full_min as f64);
                h.1 = h.1.max(s.depot_full_max as f64);
            }
            _ => {
                low.push((start, s.depot_full_min as f64, start + width));
                high.push((start, s.depot_full_max as f64, start + width));
            }
        }
    }
    (low, high)
}

/// `1234567.0` -> "1.2M", `25000.0` -> "25k", `38.0` -> "38".
fn compact(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{:.1}M", v / 1e6),
        a if a >= 1e4 => format!("{:.0}k", v / 1e3),
        a if a >= 10.0 || a == 0.0 => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    }
}
