#include "text/added_tokens.hpp"

#include <algorithm>

#include "text/unicode.hpp"

namespace stepmix::text {

void AddedTokenMatcher::add(const AddedToken& token, std::string content) {
  first_byte_[static_cast<unsigned char>(content[0])] = true;
  Pattern p{std::move(content), token};
  // Stable: among equally long patterns the first added wins.
  const auto at = std::upper_bound(patterns_.begin(), patterns_.end(), p,
                                   [](const Pattern& a, const Pattern& b) { return a.content.size() > b.content.size(); });
  patterns_.insert(at, std::move(p));
}

const AddedTokenMatcher::Pattern* AddedTokenMatcher::longest_at(std::string_view text, std::size_t pos) const {
  if (!first_byte_[static_cast<unsigned char>(text[pos])]) return nullptr;
  for (const Pattern& p : patterns_)
    if (text.compare(pos, p.content.size(), p.content) == 0) return &p;
  return nullptr;
}

// Hugging Face's AddedVocabulary::find_matches: a leftmost-longest scan
// (aho-corasick MatchKind::LeftmostLongest) that resumes after each match,
// also after one the single_word rule discards; lstrip never reaches back
// into the previous match, rstrip extends the match without moving the scan.
void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const Pattern* p = longest_at(text, pos);
    if (!p) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + p->content.size();
    pos = stop;
    const AddedToken& t = p->token;
    if (t.single_word && (word_char_before(text, start) || word_char_at(text, stop))) continue;
    if (t.lstrip) {
      std::size_t s = start;
      while (s > 0) {
        const std::size_t c = utf8_char_start_before(text, s);
        if (!white_space_at(text, c)) break;
        s = c;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip)
      while (stop < text.size() && white_space_at(text, stop)) stop += utf8_char_length(text, stop);
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace stepmix::text
