#include "html_report.h"

#include <fmt/format.h>

#include "actmem/util/units.h"
#include "catalog_view.h"
#include "pareto_view.h"
#include "plan_view.h"
#include "svg.h"
#include "timeline_view.h"

#ifndef ACTMEM_VERSION
#define ACTMEM_VERSION "unknown"
#endif

namespace actmem::picture {
namespace {

constexpr std::string_view kStyle = R"(
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; color: #222;
       margin: 24px auto; max-width: 1140px; padding: 0 12px; background: #fafafa; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
p.sub { color: #555; margin: 0 0 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 8px; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card .k { font-size: 12px; color: #666; }
.card .v { font-size: 17px; font-weight: 600; }
.fits .v { color: #2e8b57; } .nofit .v { color: #c0392b; }
figure { margin: 0 0 8px; background: #fff; border: 1px solid #ddd; border-radius: 6px; overflow-x: auto; }
figure svg { display: block; }
table { border-collapse: collapse; background: #fff; font-size: 13px; width: 100%; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code { font-size: 12px; }
footer { color: #777; font-size: 12px; margin-top: 24px; }
)";

std::string escape(std::string_view text) { return escape_xml(text); }

std::string card(std::string_view key, std::string_view value, std::string_view css = "") {
  return fmt::format(R"(<div class="card {}"><div class="k">{}</div><div class="v">{}</div></div>)", css, escape(key),
                     escape(value));
}

// Report::notes (accuracy_notes.h), one paragraph each: what was measured
// for runs of this kind, where they were validated apart from the rest.
std::string notes(const Report& r) {
  std::string html;
  for (const std::string& note : r.notes) html += "<p class=\"sub\">note: " + escape(note) + "</p>\n";
  return html;
}

std::string summary(const ReportFigures& f) {
  const Report& r = f.report;
  std::string where = fmt::format("{} pass, {}{}", to_string(r.peak_at.pass), r.peak_at.stage,
                                  r.peak_at.block >= 0 ? fmt::format(" block {}", r.peak_at.block) : "");
  return "<div class=\"cards\">" +
         card(r.fits ? "fits" : "does not fit", format_bytes(r.peak_bytes) + " of " + format_bytes(r.budget_bytes),
              r.fits ? "fits" : "nofit") +
         card(r.fits ? "headroom" : "short by",
              format_bytes(r.fits ? r.budget_bytes - r.peak_bytes : r.peak_bytes - r.budget_bytes)) +
         card("peak at", where) + card("recompute", fmt::format("+{:.1f}% FLOPs", 100.0 * r.recompute_overhead())) +
         card("step time (roofline)", format_seconds(r.step_time_s)) + "</div>\n" +
         fmt::format("<p class=\"sub\">plan ({}): {}</p>\n", escape(f.plan_origin),
                     escape(describe(f.plan, f.stages))) +
         notes(r);
}

std::string marks_table(const ReportFigures& f) {
  std::string rows;
  for (const MarkedPlan& m : f.marks)
    rows += fmt::format(R"(<tr data-key="{}"><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>)"
                        "\n",
                        escape(m.key), escape(m.label), format_bytes(m.peak_bytes), format_seconds(m.step_time_s),
                        m.fits ? "yes" : "no");
  return "<table class=\"marks\"><tr><th>plan</th><th>peak</th><th>step time</th><th>fits</th></tr>\n" + rows +
         "</table>\n";
}

// A trainer's export as the text to paste into its config.
std::string trainer_keys(const nlohmann::json& entry) {
  return "<pre>" + escape(entry.at("snippet").get<std::string>()) + "</pre>";
}

std::string exports_table(const ReportFigures& f) {
  std::string rows;
  for (const auto& [trainer, entry] : f.exports.items()) {
    if (entry.contains("unsupported")) {
      rows += fmt::format(R"(<tr data-trainer="{}"><td>{}</td><td colspan="6">{}</td></tr>)"
                          "\n",
                          escape(trainer), escape(trainer), escape(entry.at("unsupported").get<std::string>()));
      continue;
    }
    const nlohmann::json& p = entry.at("predicted");
    rows += fmt::format(
        R"(<tr data-trainer="{}"><td>{}</td><td>{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>)"
        "\n",
        escape(trainer), escape(trainer), trainer_keys(entry), entry.at("exact").get<bool>() ? "yes" : "no",
        format_bytes(p.at("peak_bytes").get<std::int64_t>()), format_seconds(p.at("step_time_s").get<double>()),
        p.at("fits").get<bool>() ? "yes" : "no", escape(entry.value("note", "")));
  }
  return "<table class=\"exports\"><tr><th>trainer</th><th>its knobs</th><th>exactly this plan</th><th>peak</th>"
         "<th>step time</th><th>fits</th><th>note</th></tr>\n" +
         rows + "</table>\n";
}

std::string figure(const std::string& svg) { return "<figure>\n" + svg + "</figure>\n"; }

// JSON inside <script>: "</" would end the element early.
std::string script_safe(std::string json) {
  for (std::size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3))
    json.replace(at, 2, "<\\/");
  return json;
}

}  // namespace

nlohmann::json figures_json(const ReportFigures& f) {
  nlohmann::json simulate = to_json(f.report);
  simulate["plan"] = plan_to_json(f.plan, f.stages);
  nlohmann::json marks = nlohmann::json::array();
  for (const MarkedPlan& m : f.marks)
    marks.push_back({{"key", m.key},
                     {"label", m.label},
                     {"peak_bytes", m.peak_bytes},
                     {"step_time_s", m.step_time_s},
                     {"fits", m.fits}});
  nlohmann::json frontier = nlohmann::json::array();
  for (const ParetoPoint& p : f.frontier)
    frontier.push_back({{"plan", plan_to_json(p.plan, f.stages)},
                        {"peak_bytes", p.report.peak_bytes},
                        {"step_time_s", p.report.step_time_s}});
  nlohmann::json catalog = nlohmann::json::array();
  for (const CatalogEntry& e : f.catalog) {
    const FitAnswer& a = e.answer;
    catalog.push_back({{"device", e.device.id},
                       {"batch", f.run.batch},
                       {"rollout", f.run.rollout},
                       {"fits", a.fits},
                       {"host_offload", a.plan.host_offload},
                       {"peak_bytes", a.peak_bytes},
                       {"min_peak_bytes", a.min_peak_bytes},
                       {"budget_bytes", a.budget_bytes},
                       {"headroom_bytes", e.device.memory_bytes - a.budget_bytes},
                       {"recompute_overhead", a.report.recompute_overhead()},
                       {"step_time_s", a.report.step_time_s}});
  }
  return {
      {"simulate", simulate}, {"marks", marks}, {"frontier", frontier}, {"catalog", catalog}, {"exports", f.exports}};
}

std::string html_report(const ReportFigures& f) {
  const std::string title = fmt::format("actmem report: {} on {}", f.model_name, f.device.id);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", escape(title), kStyle);
  html += fmt::format("<h1>{}</h1>\n<p class=\"sub\">{}</p>\n", escape(title), escape(f.subtitle));
  html += summary(f);
  html += "<h2 id=\"memory\">Memory through the step</h2>\n" + figure(timeline_svg(f.report, f.subtitle));
  html += "<h2 id=\"tradeoff\">Memory against time</h2>\n" + figure(pareto_svg(f)) + marks_table(f);
  html += "<h2 id=\"devices\">Devices</h2>\n" + figure(catalog_svg(f));
  html += "<h2 id=\"the-plan\">The plan</h2>\n" + figure(plan_svg(f));
  html += "<h2 id=\"exports\">In each trainer's knobs</h2>\n" + exports_table(f);
  html += fmt::format(
      "<footer>actmem {}: every figure is the simulator's (docs/cost-model.md); hover over a shape for its "
      "details.</footer>\n",
      ACTMEM_VERSION);
  html += "<script type=\"application/json\" id=\"actmem-figures\">" + script_safe(figures_json(f).dump()) +
          "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace actmem::picture
