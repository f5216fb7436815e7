#include "io/video.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "io/ffmpeg_library.hpp"
#include "stepmix/error.hpp"
#include "stepmix/model.hpp"  // kMinFps, kMaxFps

namespace stepmix {
namespace fs = std::filesystem;

namespace {

// FFmpeg's libraries, opened at the first video (io/ffmpeg_library.hpp).
const detail::FfmpegLibrary& av() { return detail::ffmpeg(); }

std::string av_error(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av().av_strerror(code, text, sizeof text);
  return text;
}

[[noreturn]] void fail_video(const std::string& path, const std::string& what, int code = 0) {
  throw Error("video", path + ": " + what + (code ? ": " + av_error(code) : std::string()));
}

// Before the first call on a video named `path`: libraries that cannot be
// opened are an error naming it.
void open_ffmpeg_for(const std::string& path) {
  const std::string reason = video_unavailable();
  if (!reason.empty()) fail_video(path, reason);
}

}  // namespace

// The owning pointers are in a named namespace, not an anonymous one:
// Mp4Writer::State (external linkage) holds them.
namespace video_detail {

struct FreeFrame {
  void operator()(AVFrame* f) const { av().av_frame_free(&f); }
};
struct FreePacket {
  void operator()(AVPacket* p) const { av().av_packet_free(&p); }
};
struct FreeCodec {
  void operator()(AVCodecContext* c) const { av().avcodec_free_context(&c); }
};
struct FreeScaler {
  void operator()(SwsContext* s) const { av().sws_freeContext(s); }
};
using FramePtr = std::unique_ptr<AVFrame, FreeFrame>;
using PacketPtr = std::unique_ptr<AVPacket, FreePacket>;
using CodecPtr = std::unique_ptr<AVCodecContext, FreeCodec>;
using ScalerPtr = std::unique_ptr<SwsContext, FreeScaler>;

}  // namespace video_detail
using video_detail::CodecPtr;
using video_detail::FramePtr;
using video_detail::PacketPtr;
using video_detail::ScalerPtr;

// ---------------------------------------------------------------- writer
// The MP4 file grows in memory: the muxer seeks back to patch sizes, which
// this buffer allows, and the caller stages the bytes as one output.
struct MemoryFile {
  std::string bytes;
  int64_t position = 0;

  static int write(void* opaque, uint8_t* data, int size) {  // not const in FFmpeg 5
    auto& f = *static_cast<MemoryFile*>(opaque);
    const std::size_t end = std::size_t(f.position) + std::size_t(size);
    if (f.bytes.size() < end) f.bytes.resize(end);
    std::copy_n(data, size, f.bytes.begin() + f.position);
    f.position = int64_t(end);
    return size;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto& f = *static_cast<MemoryFile*>(opaque);
    if (whence & AVSEEK_SIZE) return int64_t(f.bytes.size());
    const int64_t base = (whence & 3) == SEEK_CUR ? f.position : (whence & 3) == SEEK_END ? int64_t(f.bytes.size()) : 0;
    if (base + offset < 0) return AVERROR(EINVAL);
    f.position = base + offset;
    return f.position;
  }
};

struct Mp4Writer::State {
  std::string path;
  MemoryFile file;
  AVIOContext* io = nullptr;
  AVFormatContext* format = nullptr;
  AVStream* stream = nullptr;
  CodecPtr codec;
  FramePtr frame;
  PacketPtr packet;
  ScalerPtr scaler;
  int width = 0, height = 0;
  int64_t frames = 0;
  bool finished = false;

  ~State() {
    if (format) av().avformat_free_context(format);
    if (io) {
      av().av_freep(&io->buffer);
      av().avio_context_free(&io);
    }
  }

  // Sends `f` (null: flush) and writes every packet the encoder returns.
  void encode(const AVFrame* f) {
    int rc = av().avcodec_send_frame(codec.get(), f);
    if (rc < 0) fail_video(path, "encoding frame " + std::to_string(frames), rc);
    for (;;) {
      rc = av().avcodec_receive_packet(codec.get(), packet.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) fail_video(path, "encoding", rc);
      av().av_packet_rescale_ts(packet.get(), codec->time_base, stream->time_base);
      packet->stream_index = stream->index;
      rc = av().av_interleaved_write_frame(format, packet.get());
      if (rc < 0) fail_video(path, "writing a packet", rc);
    }
  }
};

Mp4Writer::Mp4Writer(const std::string& path, int width, int height, double fps) : state_(std::make_unique<State>()) {
  open_ffmpeg_for(path);
  State& s = *state_;
  s.path = path;
  s.width = width;
  s.height = height;
  if (width < 2 || height < 2 || width % 2 || height % 2)
    fail_video(path, "frame size " + std::to_string(width) + "x" + std::to_string(height) +
                   ": expected even width and height (yuv420p)");
  if (!(fps >= kMinFps && fps <= kMaxFps))
    fail_video(path, "fps " + Error::number(fps) + ": expected a number in [" + Error::number(kMinFps) + ", " +
                         Error::number(kMaxFps) + "]");

  const AVCodec* encoder = av().avcodec_find_encoder_by_name("libx264");
  if (!encoder) encoder = av().avcodec_find_encoder(AV_CODEC_ID_H264);
  if (!encoder) fail_video(path, "this FFmpeg build has no H.264 encoder (Debian's libavcodec has libx264)");
  int rc = av().avformat_alloc_output_context2(&s.format, nullptr, "mp4", nullptr);
  if (rc < 0 || !s.format) fail_video(path, "creating the MP4 container", rc);
  s.stream = av().avformat_new_stream(s.format, nullptr);
  s.codec.reset(av().avcodec_alloc_context3(encoder));
  s.frame.reset(av().av_frame_alloc());
  s.packet.reset(av().av_packet_alloc());
  if (!s.stream || !s.codec || !s.frame || !s.packet) fail_video(path, "out of memory");

  const AVRational rate = av().av_d2q(fps, 1 << 20);
  AVCodecContext& c = *s.codec;
  c.width = width;
  c.height = height;
  c.pix_fmt = AV_PIX_FMT_YUV420P;
  c.framerate = rate;
  c.time_base = av_inv_q(rate);
  c.gop_size = 24;
  // libswscale converts RGB with the BT.601 matrix into limited range; say so.
  c.colorspace = AVCOL_SPC_SMPTE170M;
  c.color_primaries = AVCOL_PRI_SMPTE170M;
  c.color_trc = AVCOL_TRC_SMPTE170M;
  c.color_range = AVCOL_RANGE_MPEG;
  if (s.format->oformat->flags & AVFMT_GLOBALHEADER) c.flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  AVDictionary* options = nullptr;
  av().av_dict_set(&options, "crf", "17", 0);  // visually lossless for decoded frames
  av().av_dict_set(&options, "preset", "medium", 0);
  rc = av().avcodec_open2(&c, encoder, &options);
  av().av_dict_free(&options);
  if (rc < 0) fail_video(path, "opening the H.264 encoder", rc);
  rc = av().avcodec_parameters_from_context(s.stream->codecpar, &c);
  if (rc < 0) fail_video(path, "setting the stream parameters", rc);
  s.stream->time_base = c.time_base;
  s.stream->avg_frame_rate = rate;
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<unsigned char*>(av().av_malloc(kIoBuffer));
  if (!buffer) fail_video(path, "out of memory");
  s.io = av().avio_alloc_context(buffer, kIoBuffer, 1, &s.file, nullptr, MemoryFile::write, MemoryFile::seek);
  if (!s.io) {
    av().av_free(buffer);
    fail_video(path, "out of memory");
  }
  s.format->pb = s.io;
  s.format->flags |= AVFMT_FLAG_CUSTOM_IO;
  rc = av().avformat_write_header(s.format, nullptr);
  if (rc < 0) fail_video(path, "writing the MP4 header", rc);

  s.frame->format = AV_PIX_FMT_YUV420P;
  s.frame->width = width;
  s.frame->height = height;
  rc = av().av_frame_get_buffer(s.frame.get(), 0);
  if (rc < 0) fail_video(path, "allocating a frame", rc);
  s.scaler.reset(av().sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, AV_PIX_FMT_YUV420P, SWS_BICUBIC,
                                nullptr, nullptr, nullptr));
  if (!s.scaler) fail_video(path, "creating the RGB to yuv420p converter");
}

Mp4Writer::~Mp4Writer() = default;

int64_t Mp4Writer::frames() const { return state_->frames; }

void Mp4Writer::add_frame(const Image8& rgb) {
  State& s = *state_;
  if (s.finished) fail_video(s.path, "add_frame after finish");
  if (rgb.width != s.width || rgb.height != s.height || rgb.channels != 3 ||
      rgb.pixels.size() != std::size_t(rgb.width) * rgb.height * 3)
    fail_video(s.path, "frame " + std::to_string(s.frames) + " is " + std::to_string(rgb.width) + "x" +
                     std::to_string(rgb.height) + "x" + std::to_string(rgb.channels) + ", expected " +
                     std::to_string(s.width) + "x" + std::to_string(s.height) + " RGB");
  int rc = av().av_frame_make_writable(s.frame.get());
  if (rc < 0) fail_video(s.path, "frame buffer", rc);
  const uint8_t* source[1] = {rgb.pixels.data()};
  const int stride[1] = {rgb.width * 3};
  av().sws_scale(s.scaler.get(), source, stride, 0, rgb.height, s.frame->data, s.frame->linesize);
  s.frame->pts = s.frames++;
  s.encode(s.frame.get());
}

std::string Mp4Writer::finish() {
  State& s = *state_;
  if (s.finished) fail_video(s.path, "finish called twice");
  if (s.frames == 0) fail_video(s.path, "no frames to write");
  s.encode(nullptr);
  const int rc = av().av_write_trailer(s.format);
  if (rc < 0) fail_video(s.path, "writing the MP4 index", rc);
  av().avio_flush(s.io);
  if (s.io->error < 0) fail_video(s.path, "writing the MP4 file", s.io->error);
  s.finished = true;
  return std::move(s.file.bytes);
}

// ---------------------------------------------------------------- reader
namespace {

struct Reader {
  std::string path;
  AVFormatContext* format = nullptr;
  CodecPtr codec;
  int stream = -1;
  ScalerPtr scaler;

  explicit Reader(const std::string& p) : path(p) {
    open_ffmpeg_for(path);
    int rc = av().avformat_open_input(&format, path.c_str(), nullptr, nullptr);
    if (rc < 0) fail_video(path, "not a readable video", rc);
    rc = av().avformat_find_stream_info(format, nullptr);
    if (rc < 0) fail_video(path, "reading the stream information", rc);
    const AVCodec* decoder = nullptr;
    stream = av().av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
    if (stream < 0 || !decoder) fail_video(path, "no decodable video stream", stream < 0 ? stream : 0);
    codec.reset(av().avcodec_alloc_context3(decoder));
    if (!codec) fail_video(path, "out of memory");
    rc = av().avcodec_parameters_to_context(codec.get(), format->streams[stream]->codecpar);
    if (rc < 0) fail_video(path, "stream parameters", rc);
    rc = av().avcodec_open2(codec.get(), decoder, nullptr);
    if (rc < 0) fail_video(path, "opening the decoder", rc);
  }
  ~Reader() { av().avformat_close_input(&format); }

  // fn(frame) for every decoded frame in order until it returns false.
  template <class Fn>
  void decode(const Fn& fn) {
    PacketPtr packet(av().av_packet_alloc());
    FramePtr frame(av().av_frame_alloc());
    bool more = true;
    auto drain = [&]() {
      for (;;) {
        const int rc = av().avcodec_receive_frame(codec.get(), frame.get());
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return true;
        if (rc < 0) fail_video(path, "decoding", rc);
        if (!fn(*frame)) return false;
      }
    };
    while (more) {
      const int rc = av().av_read_frame(format, packet.get());
      if (rc == AVERROR_EOF) break;
      if (rc < 0) fail_video(path, "reading", rc);
      if (packet->stream_index == stream) {
        const int sent = av().avcodec_send_packet(codec.get(), packet.get());
        if (sent < 0) fail_video(path, "decoding", sent);
        more = drain();
      }
      av().av_packet_unref(packet.get());
    }
    if (more) {
      av().avcodec_send_packet(codec.get(), nullptr);
      drain();
    }
  }

  Image8 to_rgb(const AVFrame& f) {
    scaler.reset(av().sws_getContext(f.width, f.height, AVPixelFormat(f.format), f.width, f.height, AV_PIX_FMT_RGB24,
                                SWS_BICUBIC, nullptr, nullptr, nullptr));
    if (!scaler) fail_video(path, "creating the converter to RGB");
    Image8 out;
    out.width = f.width;
    out.height = f.height;
    out.channels = 3;
    out.pixels.resize(std::size_t(f.width) * f.height * 3);
    uint8_t* target[1] = {out.pixels.data()};
    const int stride[1] = {f.width * 3};
    av().sws_scale(scaler.get(), f.data, f.linesize, 0, f.height, target, stride);
    return out;
  }
};

}  // namespace

VideoInfo probe_video(const std::string& path) {
  Reader r(path);
  VideoInfo info;
  const AVStream* s = r.format->streams[r.stream];
  info.width = s->codecpar->width;
  info.height = s->codecpar->height;
  info.fps = av_q2d(s->avg_frame_rate);
  info.codec = av().avcodec_get_name(s->codecpar->codec_id);
  const char* pixel_format = av().av_get_pix_fmt_name(AVPixelFormat(s->codecpar->format));
  info.pixel_format = pixel_format ? pixel_format : "";
  r.decode([&](const AVFrame&) {
    ++info.frames;
    return true;
  });
  return info;
}

Image8 read_video_frame(const std::string& path, int64_t index) {
  Reader r(path);
  Image8 out;
  int64_t seen = 0;
  r.decode([&](const AVFrame& f) {
    if (seen++ < index) return true;
    out = r.to_rgb(f);
    return false;
  });
  if (out.pixels.empty()) fail_video(path, "frame " + std::to_string(index) + ": the video has only " + std::to_string(seen) + " frames");
  return out;
}

bool video_built() { return true; }

std::string video_unavailable() {
  try {
    av();
    return "";
  } catch (const Error& e) {
    // The loader's message without its "[video] ": callers add their own context.
    std::string reason = e.what();
    const std::string component = "[video] ";
    if (reason.rfind(component, 0) == 0) reason.erase(0, component.size());
    return reason;
  }
}

}  // namespace stepmix
