#include "text/unicode.hpp"

#include <oniguruma.h>
#include <utf8proc.h>

#include <cstdlib>
#include <mutex>

#include "stepmix/error.hpp"

namespace stepmix::text {
namespace {

// Length of the well-formed sequence starting at s[i], or the length of its
// maximal ill-formed subpart negated (at least 1). Table 3-7 of the Unicode
// standard: the second byte's range depends on the first byte.
long sequence_at(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int length;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k < length; ++k) {
    if (i + k >= s.size()) return -k;
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) return -k;
  }
  return length;
}

void oniguruma_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

const Regex& word_class() {
  static const Regex r(R"([\p{Alphabetic}\p{N}_])", "tokenizer", "word character class");
  return r;
}
const Regex& space_class() {
  static const Regex r(R"(\p{White_Space})", "tokenizer", "white space class");
  return r;
}

std::string utf8proc_map_compose(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    std::free(out);
    throw Error("tokenizer", std::string("NFC: ") + utf8proc_errmsg(n));
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return result;
}

// U+11A7, the filler just below the trailing consonants U+11A8..U+11C2, is
// not a trailing consonant: an LV syllable followed by it stays as it is
// (Unicode §3.12: TIndex 0 does not compose). utf8proc 2.8 composes it and so
// deletes it ("\uAC00\u11A7" -> "\uAC00"). The filler is a starter that
// composes with nothing on either side, so the text is normalised piece by
// piece between fillers, and each filler kept.
std::string utf8proc_compose(std::string_view s) {
  static constexpr std::string_view kJamoFiller = "\xE1\x86\xA7";  // U+11A7
  std::size_t filler = s.find(kJamoFiller);
  if (filler == std::string_view::npos) return utf8proc_map_compose(s);
  std::string out;
  out.reserve(s.size());
  std::size_t start = 0;
  for (; filler != std::string_view::npos; filler = s.find(kJamoFiller, start)) {
    out += utf8proc_map_compose(s.substr(start, filler - start));
    out += kJamoFiller;
    start = filler + kJamoFiller.size();
  }
  out += utf8proc_map_compose(s.substr(start));
  return out;
}

}  // namespace

std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const long n = sequence_at(s, i);
    if (n < 0) return i;
    i += static_cast<std::size_t>(n);
  }
  return std::string_view::npos;
}

void require_utf8(std::string_view s, const std::string& component, const std::string& label) {
  const std::size_t bad = first_invalid_utf8(s);
  if (bad != std::string_view::npos)
    throw Error(component, label + ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const long n = sequence_at(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, static_cast<std::size_t>(n)));
      i += static_cast<std::size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      i += static_cast<std::size_t>(-n);
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string nfc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    while (j < s.size() && static_cast<unsigned char>(s[j]) < 0x80) ++j;
    if (j == s.size()) {
      out.append(s.substr(i));
      break;
    }
    const std::size_t start = j > i ? j - 1 : j;  // the ASCII starter before the stretch
    out.append(s.substr(i, start - i));
    std::size_t k = j;
    while (k < s.size() && static_cast<unsigned char>(s[k]) >= 0x80) ++k;
    out += utf8proc_compose(s.substr(start, k - start));
    i = k;
  }
  return out;
}

std::string nfc_whole(std::string_view s) { return utf8proc_compose(s); }

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += static_cast<char>(b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b);
      ++i;
      continue;
    }
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                                static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0)  // unreachable for checked input; kept so a caller's slip is an error, not a wrong id
      throw Error("tokenizer", "Lowercase: text not valid UTF-8 at byte " + std::to_string(i));
    i += static_cast<std::size_t>(n);
    if (c == 0x130) {  // the one unconditional lowercase mapping longer than one character
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(c)));
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& component, const std::string& label) {
  oniguruma_init();
  OnigRegex reg = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&reg, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_ONIGURUMA, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    throw Error(component, label + ": not a valid regular expression: " + reinterpret_cast<const char*>(message));
  }
  regex_ = reg;
}

Regex::~Regex() {
  if (regex_) onig_free(static_cast<OnigRegex>(regex_));
}

void Regex::find_all(std::string_view s, std::vector<std::pair<std::size_t, std::size_t>>& matches) const {
  matches.clear();
  const auto* str = reinterpret_cast<const OnigUChar*>(s.data());
  const OnigUChar* end = str + s.size();
  OnigRegion* region = onig_region_new();
  std::size_t from = 0;
  bool have_last = false;
  std::size_t last_end = 0;
  while (from <= s.size()) {
    const int r = onig_search(static_cast<OnigRegex>(regex_), str, end, str + from, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH, or a search error (none for these patterns)
    const auto b = static_cast<std::size_t>(region->beg[0]), e = static_cast<std::size_t>(region->end[0]);
    if (b == e && have_last && last_end == e) {
      from += from < s.size() ? utf8_char_length(s, from) : 1;
      continue;
    }
    matches.emplace_back(b, e);
    from = e;
    have_last = true;
    last_end = e;
  }
  onig_region_free(region, 1);
}

long Regex::match_at(std::string_view s, std::size_t pos) const {
  const auto* str = reinterpret_cast<const OnigUChar*>(s.data());
  const int r = onig_match(static_cast<OnigRegex>(regex_), str, str + s.size(), str + pos, nullptr, ONIG_OPTION_NONE);
  return r < 0 ? -1 : r;
}

std::size_t utf8_char_length(std::string_view s, std::size_t pos) {
  const long n = sequence_at(s, pos);
  return n > 0 ? static_cast<std::size_t>(n) : 1;
}

std::size_t utf8_char_start_before(std::string_view s, std::size_t end) {
  std::size_t p = end - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80 && end - p < 4) --p;
  return p;
}

bool word_char_at(std::string_view s, std::size_t pos) { return pos < s.size() && word_class().match_at(s, pos) > 0; }
bool word_char_before(std::string_view s, std::size_t end) {
  return end > 0 && word_class().match_at(s, utf8_char_start_before(s, end)) > 0;
}
bool white_space_at(std::string_view s, std::size_t pos) { return pos < s.size() && space_class().match_at(s, pos) > 0; }

}  // namespace stepmix::text
