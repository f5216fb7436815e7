// Added tokens (tokenizer.json "added_tokens"): strings such as <|im_end|>
// that are cut out of the text before the model sees it, as Hugging Face's
// AddedVocabulary does. Matching is exact and case-sensitive,
// leftmost-longest; the flags refine a match:
//   single_word  only when no word character touches either end
//   lstrip       the match also takes the white space before it
//   rstrip       the match also takes the white space after it
//   normalized   matched in the normalised text (else in the raw text)
//   special      dropped by decode(skip_special_tokens = true)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stepmix::text {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// One piece of a split: text [begin, end) when id < 0, else an added token
// that covers [begin, end) (its stripped white space included).
struct Segment {
  std::size_t begin, end;
  int64_t id;
};

class AddedTokenMatcher {
 public:
  // `content` is what the token is matched as: its content, normalised when
  // the token belongs to the normalized set.
  void add(const AddedToken& token, std::string content);
  bool empty() const { return patterns_.empty(); }

  // Splits `text` into text and token segments, in order; empty text
  // segments are left out.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Pattern {
    std::string content;
    AddedToken token;
  };
  // Longest match starting at `pos`, or nullptr.
  const Pattern* longest_at(std::string_view text, std::size_t pos) const;

  std::vector<Pattern> patterns_;                // longest first
  std::array<bool, 256> first_byte_{};           // some pattern starts with this byte
};

}  // namespace stepmix::text
