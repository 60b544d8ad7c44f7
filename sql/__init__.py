"""Not code: the SQL files (DDL, marts, every query and write of the layers), installed as the
package data of `metapilot.sql` so that an installed wheel finds them (`metapilot.ground.paths`)."""
