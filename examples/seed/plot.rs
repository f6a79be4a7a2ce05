//! The plot: depot length and cumulative slow-path calls over simulated time, one line per
//! policy, the idle phase shaded.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::sim::{Outcome, Sample};

/// One panel of the figure: what it plots from each sample.
struct Panel {
    caption: &'static str,
    y_desc: &'static str,
    value: fn(&Sample) -> f64,
    /// Whether the y axis starts at the lowest value at the end of the warm-up.
    from_warmup: bool,
}

const PANELS: [Panel; 2] = [
    Panel {
        caption: "Depot length",
        y_desc: "full magazines in the depot",
        value: |s| s.depot_full as f64,
        from_warmup: false,
    },
    Panel {
        caption: "Slow path (source) calls, axis from the end of the warm-up",
        y_desc: "cumulative allocs + frees",
        value: |s| (s.slow.allocs + s.slow.frees) as f64,
        from_warmup: true,
    },
];

/// Draws both panels into an SVG file.
pub fn draw(outcomes: &[Outcome], path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((PANELS.len(), 1));
    for (panel, area) in PANELS.iter().zip(&areas) {
        draw_panel(panel, outcomes, area).map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn draw_panel(
    panel: &Panel,
    outcomes: &[Outcome],
    area: &DrawingArea<SVGBackend<'_>, Shift>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let seconds = |s: &Sample| s.ns as f64 / 1e9;
    let end = outcomes
        .iter()
        .flat_map(|o| o.samples.last())
        .map(seconds)
        .fold(1e-3, f64::max);
    let values = || outcomes.iter().flat_map(|o| &o.samples).map(panel.value);
    let top = values().fold(1.0, f64::max) * 1.1;
    // The axis starts where the lines settle (the warm-up's initial fill is cut off), so
    // that differences between policies are not flattened by the fill.
    let bottom = match panel.from_warmup {
        false => 0.0,
        true => {
            outcomes
                .iter()
                .flat_map(|o| o.samples.iter().find(|s| s.ns >= o.warmup_end_ns))
                .map(panel.value)
                .fold(top, f64::min)
                * 0.98
        }
    };
    let load_end = outcomes.first().map_or(end, |o| o.load_end_ns as f64 / 1e9);

    let mut chart = ChartBuilder::on(area)
        .caption(panel.caption, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..end, bottom..top)?;
    chart
        .configure_mesh()
        .x_desc("simulated time (s)")
        .y_desc(panel.y_desc)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(load_end, bottom), (end, top)],
            RGBColor(225, 225, 225).filled(),
        )))?
        .label("idle phase (no I/O, trim on schedule)")
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 5), (x + 20, y + 5)],
                RGBColor(225, 225, 225).filled(),
            )
        });
    for (i, outcome) in outcomes.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        // Policies that behave alike draw the same line: earlier ones are wider, so that
        // every one stays visible under the later ones.
        let width = 1 + (outcomes.len() - i) as u32;
        let points = outcome
            .samples
            .iter()
            .map(|s| (seconds(s), (panel.value)(s)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(width)))?
            .label(outcome.contender.label())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}
