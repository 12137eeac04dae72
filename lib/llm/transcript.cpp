// The transcript format: one JSON object per line (docs/llm.md).
#include <fmt/format.h>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "util/fs.hpp"

KS_NAMESPACE_BEGIN

Json TranscriptEntry::to_json() const {
  return Json::obj({{"seq", seq},
                    {"kind", to_string(request.kind)},
                    {"policy", policy},
                    {"request", Json::obj({{"system", request.system}, {"prompt", request.prompt}})},
                    {"response", response.to_json()},
                    {"time", time}});
}

TranscriptEntry TranscriptEntry::from_json(const Json& j) {
  if (!j.is_object()) throw Error(Status::parse, "a transcript entry must be a JSON object");
  TranscriptEntry e;
  try {
    const Json* kind = j.find("kind");
    if (!kind || !kind->is_string()) throw Error(Status::parse, "a transcript entry needs \"kind\" (a string)");
    auto k = prompt_kind_from_string(kind->as_string());
    if (!k)
      throw Error(Status::parse,
                  fmt::format("unknown kind \"{}\" (expected wm_init, wm_propose, wm_refine, wm_too_hard, "
                              "generate, debug or improve)",
                              kind->as_string()));
    e.request.kind = *k;
    e.seq = j.get_int("seq");
    e.policy = j.get_string("policy");
    e.time = j.get_string("time");
    if (const Json* req = j.find("request"); req && !req->is_null()) {
      if (!req->is_object()) throw Error(Status::parse, "\"request\" must be an object");
      e.request.system = req->get_string("system");
      e.request.prompt = req->get_string("prompt");
    }
    const Json* resp = j.find("response");
    const Json* text = j.find("text");
    if (resp && text) throw Error(Status::parse, "give \"response\" or its shorthand \"text\", not both");
    if (resp) {
      if (!resp->is_object()) throw Error(Status::parse, "\"response\" must be an object");
      e.response = LlmResponse::from_json(*resp);
    } else if (text) {
      if (!text->is_string()) throw Error(Status::parse, "\"text\" must be a string");
      e.response.ok = true;
      e.response.text = text->as_string();
    } else {
      throw Error(Status::parse, "a transcript entry needs \"response\" (or the shorthand \"text\")");
    }
  } catch (const Error& err) {
    // Type mismatches inside surface as invalid_argument; in a file they are parse errors.
    throw Error(Status::parse, err.what());
  }
  return e;
}

std::vector<TranscriptEntry> read_transcript(const std::filesystem::path& path) {
  std::string text = util::read_file(path, util::kMaxTranscriptBytes);
  std::vector<TranscriptEntry> out;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    std::size_t nl = text.find('\n', pos);
    bool last_unterminated = nl == std::string::npos;
    std::string_view line(text.data() + pos, (last_unterminated ? text.size() : nl) - pos);
    pos = last_unterminated ? text.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string err;
    auto j = Json::try_parse(line, &err);
    if (!j) {
      // A last line without its newline that does not parse was cut off by
      // a kill mid-write: it was never a complete record.
      if (last_unterminated) break;
      throw Error(Status::parse, fmt::format("transcript {}, line {}: {}", path.string(), line_no, err));
    }
    try {
      out.push_back(TranscriptEntry::from_json(*j));
    } catch (const Error& e) {
      throw Error(Status::parse, fmt::format("transcript {}, line {}: {}", path.string(), line_no, e.what()));
    }
  }
  return out;
}

KS_NAMESPACE_END
