#include "text/tokenizer_document.hpp"

#include <algorithm>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix::text {
namespace {

using json = nlohmann::json;

// SAX events go to nlohmann's own tree builder, except the value of
// model.vocab and model.merges, which are captured (the tree gets null).
class Capture {
 public:
  explicit Capture(TokenizerDocument& out) : out_(out), dom_(out.doc, /*allow_exceptions=*/true) {}

  bool null() { return scalar([&] { return dom_.null(); }, "null"); }
  bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }, v ? "true" : "false"); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::vocab && depth_ == 1) return vocab_id(v >= 0 && v <= kMaxTokenId, v);
    return scalar([&] { return dom_.number_integer(v); }, std::to_string(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::vocab && depth_ == 1) return vocab_id(v <= uint64_t(kMaxTokenId), int64_t(std::min<uint64_t>(v, uint64_t(kMaxTokenId))));
    return scalar([&] { return dom_.number_unsigned(v); }, std::to_string(v));
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return scalar([&] { return dom_.number_float(v, s); }, s);
  }
  bool string(json::string_t& s) {
    if (mode_ == Mode::merges && depth_ == 1) return merge_string(s);
    if (mode_ == Mode::merges && depth_ == 2 && pair_) {
      pair_parts_.push_back(s);
      return true;
    }
    return scalar([&] { return dom_.string(s); }, json(s).dump());
  }
  bool binary(json::binary_t& b) { return dom_.binary(b); }

  bool start_object(std::size_t n) { return open(true, n); }
  bool start_array(std::size_t n) { return open(false, n); }
  bool end_object() { return close(true); }
  bool end_array() { return close(false); }

  bool key(json::string_t& k) {
    if (mode_ != Mode::none) {
      if (mode_ == Mode::vocab && depth_ == 1) token_ = k;
      return true;
    }
    if (dom_depth_ == 1) root_key_ = k;
    if (dom_depth_ == 2 && in_model_) model_key_ = k;
    return dom_.key(k);
  }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last, const Exception& e) {
    return dom_.parse_error(position, last, e);
  }

 private:
  enum class Mode { none, vocab, merges, skip };

  // A value in tree mode: is it the start of a captured member?
  bool capturing_member() const { return mode_ == Mode::none && dom_depth_ == 2 && in_model_ && (model_key_ == "vocab" || model_key_ == "merges"); }

  template <class Forward>
  bool scalar(Forward&& forward, const std::string& shown) {
    if (mode_ == Mode::none) {
      if (!capturing_member()) return forward();
      (model_key_ == "vocab" ? out_.vocab.present : out_.merges.present) = true;
      return dom_.null();
    }
    if (mode_ == Mode::vocab && depth_ == 1) return vocab_id(false, 0);
    if (mode_ == Mode::merges && depth_ == 1) return merge_error(shown);
    if (mode_ == Mode::merges && depth_ == 2) pair_ok_ = false;
    return true;
  }

  bool open(bool object, std::size_t n) {
    if (mode_ == Mode::none) {
      if (capturing_member()) {
        const bool vocab = model_key_ == "vocab";
        (vocab ? out_.vocab.present : out_.merges.present) = true;
        if (vocab) out_.vocab.is_object = object;
        else out_.merges.is_array = !object;
        mode_ = vocab == object ? (vocab ? Mode::vocab : Mode::merges) : Mode::skip;
        depth_ = 1;
        return true;
      }
      if (object && dom_depth_ == 1 && root_key_ == "model") in_model_ = true, model_depth_ = dom_depth_ + 1;
      ++dom_depth_;
      return object ? dom_.start_object(n) : dom_.start_array(n);
    }
    if (mode_ == Mode::vocab && depth_ == 1) vocab_id(false, 0);
    if (mode_ == Mode::merges && depth_ == 1) {
      if (object) {
        merge_error("an object");
      } else {
        pair_ = true;
        pair_ok_ = true;
        pair_parts_.clear();
      }
    } else if (mode_ == Mode::merges && depth_ == 2) {
      pair_ok_ = false;
    }
    ++depth_;
    return true;
  }

  bool close(bool object) {
    if (mode_ == Mode::none) {
      if (dom_depth_ == model_depth_) in_model_ = false, model_depth_ = -1;
      --dom_depth_;
      return object ? dom_.end_object() : dom_.end_array();
    }
    --depth_;
    if (mode_ == Mode::merges && depth_ == 1 && pair_) {
      pair_ = false;
      if (pair_ok_ && pair_parts_.size() == 2)
        out_.merges.pairs.emplace_back(std::move(pair_parts_[0]), std::move(pair_parts_[1]));
      else
        merge_error("an array of " + std::to_string(pair_parts_.size()) + " strings" + (pair_ok_ ? "" : " and other values"), false);
      ++merge_index_;
    }
    if (depth_ == 0) {
      mode_ = Mode::none;
      return dom_.null();
    }
    return true;
  }

  bool vocab_id(bool valid, int64_t id) {
    if (valid)
      out_.vocab.entries.emplace_back(token_, id);
    else if (!out_.vocab.error)
      out_.vocab.error = "model.vocab." + token_ + ": expected an integer id in [0, " + kMaxIdText + "]";
    return true;
  }

  bool merge_string(const std::string& s) {
    const std::size_t space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() && s.find(' ', space + 1) == std::string::npos) {
      out_.merges.pairs.emplace_back(s.substr(0, space), s.substr(space + 1));
      ++merge_index_;
      return true;
    }
    return merge_error(json(s).dump());
  }

  bool merge_error(const std::string& shown, bool count = true) {
    if (!out_.merges.error)
      out_.merges.error = "model.merges[" + std::to_string(merge_index_) + "]: expected \"a b\" or [\"a\", \"b\"], got " + shown;
    if (count) ++merge_index_;
    return true;
  }

  TokenizerDocument& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int dom_depth_ = 0;
  bool in_model_ = false;
  int model_depth_ = -1;
  std::string root_key_, model_key_;

  Mode mode_ = Mode::none;
  int depth_ = 0;  // inside the captured value
  std::string token_;
  bool pair_ = false, pair_ok_ = true;
  std::vector<std::string> pair_parts_;
  std::size_t merge_index_ = 0;
};

}  // namespace

TokenizerDocument parse_tokenizer_document(std::string_view text, const std::string& label) {
  check_json_nesting(text, label, "tokenizer");
  TokenizerDocument out;
  Capture capture(out);
  try {
    json::sax_parse(text.begin(), text.end(), &capture);
  } catch (const json::exception& e) {
    throw Error("tokenizer", label + ": not valid JSON: " + e.what());
  }
  return out;
}

}  // namespace stepmix::text
