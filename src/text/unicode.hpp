// The Unicode services the tokenizers need, all from Debian libraries rather
// than tables of our own: canonical composition (NFC) from utf8proc, regular
// expressions with Unicode properties (\p{L}, \p{N}, \s, lookahead) from
// Oniguruma, the regex engine Hugging Face `tokenizers` itself uses. UTF-8
// validation and lossy decoding are plain byte-structure rules (RFC 3629).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stepmix::text {

// Byte offset of the first byte that does not start or continue a well-formed
// UTF-8 sequence (overlong forms, surrogates and code points above U+10FFFF
// are ill-formed), or std::string_view::npos when all of `s` is well-formed.
std::size_t first_invalid_utf8(std::string_view s);

// Throws stepmix::Error(component, "<label>: not valid UTF-8 (byte N)").
void require_utf8(std::string_view s, const std::string& component, const std::string& label);

// UTF-8 decoding of arbitrary bytes with each maximal ill-formed subpart
// replaced by one U+FFFD (Unicode §3.9 "best practice", which is what Rust's
// from_utf8_lossy and the WHATWG TextDecoder do): E2 82 -> one U+FFFD,
// ED A0 80 -> three.
std::string utf8_lossy(std::string_view bytes);

// Appends the UTF-8 encoding of a code point (at most U+10FFFF).
void append_utf8(std::string& out, char32_t c);

// NFC of well-formed UTF-8. Runs of ASCII are copied: a boundary just before
// an ASCII character is a safe NFC boundary (every ASCII character is a
// starter that never composes with what precedes it), so only the non-ASCII
// stretches, each with the one ASCII character before it (which may compose
// with a following combining mark), go through utf8proc.
std::string nfc(std::string_view s);
// The plain twin: the whole text through utf8proc at once (split only at
// U+11A7, which utf8proc 2.8 composes away; unicode.cpp). nfc() must equal it.
std::string nfc_whole(std::string_view s);

// Hugging Face's Lowercase normaliser: every character replaced by its full
// lowercase mapping on its own (Rust's char::to_lowercase: U+0130 becomes
// "i\u0307"; no final-sigma rule, which needs context), from utf8proc's
// tables; ASCII bytes are lowered directly. `s` must be valid UTF-8 (encode
// checks the text first; tokenizer.json contents are parsed JSON strings).
std::string lowercase(std::string_view s);

// A compiled Oniguruma regex (UTF-8, Oniguruma syntax, no options: what
// `tokenizers` compiles a Split pattern with). Immutable after construction,
// so one object may be searched from several threads.
class Regex {
 public:
  // Throws stepmix::Error(component, "<label>: not a valid regular expression:
  // <Oniguruma's message>").
  Regex(const std::string& pattern, const std::string& component, const std::string& label);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match [begin, end) of a left-to-right scan, as Rust's onig crate
  // iterates them (find_iter): after an empty match directly at the end of
  // the previous match, the scan moves one character on.
  void find_all(std::string_view s, std::vector<std::pair<std::size_t, std::size_t>>& matches) const;
  // Length of the match anchored at `pos`, or -1.
  long match_at(std::string_view s, std::size_t pos) const;

 private:
  void* regex_ = nullptr;  // OnigRegex
};

// Character classes of the added-token flags (Hugging Face's single_word and
// lstrip/rstrip rules, which use Rust's char::is_alphanumeric / '_' and
// char::is_whitespace): decided by Oniguruma's \p{Alphabetic}, \p{N} and
// \p{White_Space} on the character that starts at `pos` / ends at `end`.
bool word_char_at(std::string_view s, std::size_t pos);
bool word_char_before(std::string_view s, std::size_t end);
bool white_space_at(std::string_view s, std::size_t pos);
// Byte length of the well-formed UTF-8 character that starts at `pos`
// (1 for an ASCII byte) / the start of the one that ends at `end`.
std::size_t utf8_char_length(std::string_view s, std::size_t pos);
std::size_t utf8_char_start_before(std::string_view s, std::size_t end);

}  // namespace stepmix::text
