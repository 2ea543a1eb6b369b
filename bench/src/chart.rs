//! The SVG chart: deposit throughput vs operations in flight, for the
//! carrier and the peer (plotters, SVG backend only).

use crate::report::Cell;
use plotters::prelude::*;
use std::path::Path;

/// Draws the sweep into `path`.
///
/// # Errors
/// Drawing or writing failures.
pub fn draw(path: &Path, sweep: &[Cell], title: &str) -> anyhow::Result<()> {
    let ours: Vec<(u32, f64)> = sweep
        .iter()
        .map(|c| (c.in_flight as u32, c.ours_per_s))
        .collect();
    let peer: Vec<(u32, f64)> = sweep
        .iter()
        .filter_map(|c| Some((c.in_flight as u32, c.peer_per_s?)))
        .collect();
    let x_max = ours.iter().map(|p| p.0).max().unwrap_or(1).max(2) * 3 / 2;
    let y_max = ours.iter().chain(&peer).map(|p| p.1).fold(1.0f64, f64::max) * 1.15;

    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d((1u32..x_max).log_scale(), 0f64..y_max)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("operations in flight (log scale)")
        .y_desc("admitted per second (durable)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(draw_error)?;
    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);
    for (name, points, color) in [
        ("rltp-carrier", &ours, blue),
        ("redis (appendfsync always)", &peer, red),
    ] {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(draw_error)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(draw_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    root.present().map_err(draw_error)?;
    Ok(())
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("chart: {e:?}")
}
