// Encoding and decoding in the order Hugging Face `tokenizers` runs them:
// raw added tokens out, normalise what is left, normalised added tokens out,
// pre-tokenize, model.
#include "text/tokenizer.hpp"

#include <algorithm>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"
#include "text/byte_level.hpp"
#include "text/tokenizer_impl.hpp"

namespace stepmix::text {
namespace {

// The pre-tokenizer's words (matches of t.words), each looked up whole.
void word_level_words(const TokenizerImpl& t, std::string_view piece, std::vector<int64_t>& ids,
                      std::vector<std::string>* unknown) {
  thread_local std::vector<std::pair<std::size_t, std::size_t>> matches;
  t.words->find_all(piece, matches);
  for (const auto& [begin, end] : matches) {
    if (begin == end) continue;
    const std::string w(piece.substr(begin, end - begin));
    const auto it = t.word_vocab.find(w);
    if (it != t.word_vocab.end())
      ids.push_back(it->second);
    else if (t.unk_id) {
      ids.push_back(*t.unk_id);
      if (unknown) unknown->push_back(w);
    } else
      throw Error("tokenizer",
                  t.label + ": word \"" + w + "\" is not in the vocabulary and the tokenizer has no unk_token");
  }
}

// Split(Isolated) with each regex in turn: matches and the text between them
// become pieces, empty pieces vanish. Each final piece goes to the model.
void bpe_pieces(const TokenizerImpl& t, std::string_view text, std::size_t step, std::vector<int64_t>& ids) {
  if (text.empty()) return;
  if (step == t.splits.size()) {
    t.bpe->encode_word(text, ids);
    return;
  }
  // One match list per Split step and thread, reused across calls.
  thread_local std::vector<std::vector<std::pair<std::size_t, std::size_t>>> scratch;
  if (scratch.size() < t.splits.size()) scratch.resize(t.splits.size());
  auto& matches = scratch[step];
  t.splits[step]->find_all(text, matches);
  std::size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev < b) bpe_pieces(t, text.substr(prev, b - prev), step + 1, ids);
    if (b < e) bpe_pieces(t, text.substr(b, e - b), step + 1, ids);
    prev = e;
  }
  if (prev < text.size()) bpe_pieces(t, text.substr(prev), step + 1, ids);
}

// The normalised piece: `piece` itself when normalising leaves it as it is
// (NFC of ASCII text), else a copy in `storage`.
std::string_view normalize(const TokenizerImpl& t, std::string_view piece, std::string& storage) {
  if (t.lowercase) {
    storage = lowercase(piece);
    return storage;
  }
  if (!t.nfc || std::all_of(piece.begin(), piece.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return piece;
  storage = nfc(piece);
  return storage;
}

void model_pieces(const TokenizerImpl& t, std::string_view normalized, std::vector<int64_t>& ids,
                  std::vector<std::string>* unknown) {
  if (t.kind == ModelKind::bpe)
    bpe_pieces(t, normalized, 0, ids);
  else
    word_level_words(t, normalized, ids, unknown);
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json_text(read_small_file(path, "tokenizer"), path);
}

Tokenizer Tokenizer::from_json_text(std::string_view text, const std::string& label) {
  return Tokenizer(load_tokenizer_json(text, label));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, std::vector<std::string>* unknown_words) const {
  const TokenizerImpl& t = *impl_;
  require_utf8(text, "tokenizer", t.label + ": text to encode");
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 8);  // English runs at about 4 bytes per id
  std::vector<Segment> raw, normalized_segments;
  std::string storage;
  t.raw_added.split(text, raw);
  for (const Segment& s : raw) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view normalized = normalize(t, text.substr(s.begin, s.end - s.begin), storage);
    if (t.normalized_added.empty()) {
      model_pieces(t, normalized, ids, unknown_words);
      continue;
    }
    normalized_segments.clear();
    t.normalized_added.split(normalized, normalized_segments);
    for (const Segment& n : normalized_segments) {
      if (n.id >= 0)
        ids.push_back(n.id);
      else
        model_pieces(t, normalized.substr(n.begin, n.end - n.begin), ids, unknown_words);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int64_t> ids, bool skip_special_tokens) const {
  const TokenizerImpl& t = *impl_;
  std::string out, bytes;
  bool first = true;
  for (const int64_t id : ids) {
    const auto added = t.added_by_id.find(id);
    const std::string* token = nullptr;
    if (added != t.added_by_id.end()) {
      const AddedToken& a = t.added[added->second];
      if (skip_special_tokens && a.special) continue;
      token = &a.content;
    } else {
      token = vocab_token(t, id);
      if (!token) throw Error("tokenizer", t.label + ": cannot decode id " + std::to_string(id) + ": not in the vocabulary");
    }
    if (t.kind == ModelKind::word_level) {
      if (!first) out += ' ';
      out += *token;
    } else if (added != t.added_by_id.end()) {
      out += utf8_lossy(bytes);
      bytes.clear();
      out += *token;
    } else {
      append_token_bytes(bytes, *token);
    }
    first = false;
  }
  out += utf8_lossy(bytes);
  return out;
}

std::optional<int64_t> Tokenizer::token_id(const std::string& content) const {
  for (const AddedToken& a : impl_->added)
    if (a.content == content) return a.id;
  if (impl_->kind == ModelKind::word_level) {
    const auto it = impl_->word_vocab.find(content);
    if (it != impl_->word_vocab.end()) return it->second;
    return std::nullopt;
  }
  for (const auto& [id, token] : impl_->id_to_token)
    if (token == content) return id;
  return std::nullopt;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
ModelKind Tokenizer::model_kind() const { return impl_->kind; }
const std::string& Tokenizer::label() const { return impl_->label; }

namespace {

// Levenshtein distance over bytes: vocabulary words are short and mostly
// ASCII (an accented letter that differs counts as two edits).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> Tokenizer::nearest_words(const std::string& word, std::size_t count) const {
  // A word this long is no typo of a vocabulary word, and the edit distance
  // costs its length times each entry's.
  constexpr std::size_t kMaxWordBytes = 64;
  if (word.size() > kMaxWordBytes) return {};
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& [w, id] : impl_->word_vocab) {
    // Never the unknown token or an added (special) token: not words to type.
    if (id == impl_->unk_id || impl_->added_by_id.count(id)) continue;
    scored.emplace_back(edit_distance(word, w), w);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace stepmix::text
