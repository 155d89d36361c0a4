// The syntax tree of a template: one node type, a kind and the children that kind uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ft::jinja {

enum class NodeKind {
  // statements
  IF,            // x: test, body, alt (an elif is an IF alone in alt)
  FOR,           // x: target (IDENT or TUPLE), y: iterable (SELECT: filtered loop), body, alt: else
  BREAK,
  CONTINUE,
  SET,           // x: target (IDENT, TUPLE or MEMBER), y: value or null (then body is captured)
  MACRO,         // str: name, args: parameters (IDENT or KWARG), body
  CALL_BLOCK,    // x: CALL of the macro, args: caller's parameters, body
  FILTER_BLOCK,  // x: filter (IDENT or CALL), body
  COMMENT,
  // expressions
  INT,           // i
  FLOAT,         // f
  STR,           // str (also template text)
  IDENT,         // str
  ARRAY,         // args
  TUPLE,         // args
  DICT,          // args: key, value, key, value, ...
  BINARY,        // str: operator, x, y
  UNARY,         // str: "not", "-", "+"; x
  MEMBER,        // x: object, y: property, flag: computed ([...]); y SLICE for a[1:2]
  SLICE,         // x, y, z: start, stop, step (each may be null)
  CALL,          // x: callee, args
  KWARG,         // str: name, x: value
  SPREAD,        // x (*list)
  KWSPREAD,      // x (**dict)
  FILTER,        // x: operand, y: IDENT or CALL of the filter
  TEST,          // x: operand, str: test name, flag: negated
  SELECT,        // x: value, y: condition ("a if b" without else)
  TERNARY,       // x: condition, y: if true, z: if false
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  size_t offset = 0;  // in the original template source
  std::string str;
  int64_t i = 0;
  double f = 0;
  bool flag = false;
  NodePtr x, y, z;
  NodeList args, body, alt;
};

}  // namespace ft::jinja
