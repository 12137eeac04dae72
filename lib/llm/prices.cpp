// Model prices: the built-in table, price files, and lookup.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "util/fs.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

double ModelPrice::cost(std::int64_t input_tokens, std::int64_t output_tokens, std::int64_t cached_tokens) const {
  cached_tokens = std::clamp<std::int64_t>(cached_tokens, 0, input_tokens);
  double cached_rate = cached_input_per_mtok >= 0 ? cached_input_per_mtok : input_per_mtok;
  return (static_cast<double>(input_tokens - cached_tokens) * input_per_mtok +
          static_cast<double>(cached_tokens) * cached_rate +
          static_cast<double>(output_tokens) * output_per_mtok) /
         1e6;
}

Json ModelPrice::to_json() const {
  Json j = Json::obj({{"input_per_mtok", input_per_mtok}, {"output_per_mtok", output_per_mtok}});
  if (cached_input_per_mtok >= 0) j["cached_input_per_mtok"] = cached_input_per_mtok;
  return j;
}

ModelPrice ModelPrice::from_json(const Json& j) {
  util::FieldReader r(j, "model price");
  r.allow({"input_per_mtok", "output_per_mtok", "cached_input_per_mtok"});
  ModelPrice p;
  p.input_per_mtok = r.required_number("input_per_mtok");
  p.output_per_mtok = r.required_number("output_per_mtok");
  p.cached_input_per_mtok = r.optional_number("cached_input_per_mtok", -1);
  if (p.input_per_mtok < 0 || p.output_per_mtok < 0)
    throw Error(Status::invalid_argument, "model price: prices must not be negative");
  return p;
}

const char* builtin_prices_date() { return "2026-01-15"; }

const std::map<std::string, ModelPrice>& builtin_prices() {
  // Providers' published list prices, USD per million tokens, standard
  // tier, as we understood them on builtin_prices_date(). Gemini's are for
  // prompts up to 200k tokens (longer prompts cost more). Override with a
  // price file when they change.
  static const std::map<std::string, ModelPrice> table = {
      {"gpt-5.2", {1.75, 14.00, 0.175}},
      {"gpt-5.1", {1.25, 10.00, 0.125}},
      {"gpt-5", {1.25, 10.00, 0.125}},
      {"gpt-5-mini", {0.25, 2.00, 0.025}},
      {"gpt-5-nano", {0.05, 0.40, 0.005}},
      {"o3", {2.00, 8.00, 0.50}},
      {"o4-mini", {1.10, 4.40, 0.275}},
      {"gpt-4.1", {2.00, 8.00, 0.50}},
      {"gpt-4.1-mini", {0.40, 1.60, 0.10}},
      {"gpt-4o", {2.50, 10.00, 1.25}},
      {"gemini-3-pro-preview", {2.00, 12.00, 0.20}},
      {"gemini-2.5-pro", {1.25, 10.00, 0.125}},
      {"gemini-2.5-flash", {0.30, 2.50, 0.03}},
  };
  return table;
}

std::map<std::string, ModelPrice> read_price_file(const std::filesystem::path& path) {
  Json j;
  try {
    j = Json::parse(util::read_file(path, std::size_t{1} << 20));
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("price file {}: {}", path.string(), e.what()));
  }
  if (!j.is_object())
    throw Error(Status::invalid_argument,
                fmt::format("price file {}: expected an object mapping model names to prices", path.string()));
  std::map<std::string, ModelPrice> out;
  for (const auto& [model, price] : j.as_object()) {
    try {
      out[model] = ModelPrice::from_json(price);
    } catch (const Error& e) {
      throw Error(Status::invalid_argument,
                  fmt::format("price file {}: model \"{}\": {}", path.string(), model, e.what()));
    }
  }
  return out;
}

namespace {

// "gpt-5.2-2025-12-11" is a dated snapshot of "gpt-5.2"; "o3-pro" is not "o3".
bool is_snapshot_of(std::string_view model, std::string_view name) {
  return model.size() > name.size() + 1 && model.substr(0, name.size()) == name &&
         model[name.size()] == '-' && std::isdigit(static_cast<unsigned char>(model[name.size() + 1]));
}

std::optional<ModelPrice> lookup(std::string_view model, const std::map<std::string, ModelPrice>& table) {
  if (auto it = table.find(std::string(model)); it != table.end()) return it->second;
  const ModelPrice* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& [name, price] : table)
    if (name.size() > best_len && is_snapshot_of(model, name)) {
      best = &price;
      best_len = name.size();
    }
  if (best) return *best;
  return std::nullopt;
}

}  // namespace

std::optional<ModelPrice> find_price(std::string_view model, const std::map<std::string, ModelPrice>& overrides) {
  if (model.substr(0, 7) == "models/") model.remove_prefix(7);
  if (auto p = lookup(model, overrides)) return p;
  return lookup(model, builtin_prices());
}

KS_NAMESPACE_END
